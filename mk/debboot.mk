# make deb-boot: the package, booted. A real Debian system in QEMU (TCG) with systemd as PID 1,
# dbus, bluetoothd, Debian's kernel and two btvirt controllers, nothing of ibeacon's in its image:
# amd64 (the default) boots Debian 12 (kernel 6.1) in qemu-system-x86_64; ARCH=arm64 boots Debian
# 13 (kernel 6.12) in qemu-system-aarch64 (machine virt, Cortex-A72), with the
# cross-built arm64 package. Inside it, as an operator would: apt install ./ibeacon_VERSION_ARCH.deb,
# the example profile into /etc/ibeacon, systemctl enable --now ibeacon@store12 (READY=1), an
# independent scanner on hci1 (btmgmt find + hcidump -R) hears the exact payload, kill -> restart
# -> one beacon, stop -> silent, ibeacon-monitor@store12 with the shipped example, group ibeacon
# (a user outside it cannot run the binary, a member can), systemd-analyze security <= 2.5, no
# seccomp denial; reboot of the same disk: on the air with nobody logged in, bluetooth restart,
# power cycle, upgrade, purge. scripts/debboot/guest.sh prints one PASS/FAIL line per step; the
# target fails on any FAIL. Included by the main Makefile; docs/deb-boot.md has the details.
#
#   make deb-boot [ARCH=arm64]    make deb (if the .deb is missing or older than contrib/, Sources/,
#                                 scripts/deb/, profiles/), build the image (cached),
#                                 boot it twice (scripts/debboot/run.sh)
#   make deb-boot-image [ARCH=arm64]
#                                 only the image: $(DEBBOOT_CACHE)/SUITE-ARCH.img
#   make deb-boot-clean           drop the image cache (both architectures)
#
# .ci/run runs the amd64 boot (the image built in the background from its start); the arm64 boot
# is too slow for CI under TCG and is run by hand before a change to the packaging or the units
# (RELIABILITY.md "The service, booted" has its last result).
#
# Timing, amd64, measured on a build host (2 cores, shared with a CI baseline and other jobs; TCG, no KVM):
#   cold   the image: 460 s (mmdebstrap 417 s of it, from deb.debian.org; 3 GB raw ext4, 36 MB
#          initrd); make deb from an empty .build: about 10 min for the release build + 98 s;
#          then the two boots below: about 27 min in all.
#   cached image and .deb present: 4 min 37 s and 5 min 18 s for `make deb-boot` (boot 1: 154-166 s,
#          boot 2: 112-169 s; 33 PASS, 0 FAIL in the last run) with the machine less busy; 8 min 50 s while the CI baseline ran beside it (boot
#          1: 221-349 s); first boot to the test unit about 60 s; +1-2 min for an incremental make deb.
#   2026-11-29, load 14 to 37: the amd64 image from nothing 449 s; make deb-boot 13 min 31 s (34 PASS).
# Timing, arm64: the image from nothing 3,054 s (every maintainer script under qemu-user, the
#   initramfs made twice); make deb-boot ARCH=arm64 with it cached 10 min 15 s (boots 352 + 230 s,
#   33 PASS, 0 FAIL), at load 9 to 19.

DEBBOOT_CACHE ?= /var/cache/ibeacon-debboot
DEBBOOT_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
export DEBBOOT_CACHE

.PHONY: deb-boot deb-boot-image deb-boot-deps deb-boot-clean

# The host's packages for the image (mmdebstrap; a foreign ARCH's maintainer scripts run under
# qemu-user) and the boot (QEMU; Debian's arm64 kernel is a plain Image, booted without firmware).
DEBBOOT_QEMU_amd64 := qemu-system-x86
DEBBOOT_QEMU_arm64 := qemu-system-arm qemu-user-static binfmt-support
deb-boot-deps: ## install the host packages deb-boot needs (mmdebstrap, QEMU; ARCH=arm64: qemu-system-arm, qemu-user)
	$(call apt_install,mmdebstrap e2fsprogs qemu-utils python3 dpkg-dev $(DEBBOOT_QEMU_$(ARCH)))

deb-boot-image: deb-boot-deps ## only the image deb-boot boots (ARCH=arm64: Debian 13 arm64), cached
	$(DEBBOOT_DIR)/scripts/debboot/image.sh $(ARCH)

deb-boot: deb-boot-image ## boot Debian 12 (ARCH=arm64: 13 arm64) with systemd, bluetoothd, btvirt in QEMU; apt install the .deb there, test the units as an operator
	@# The .deb again when it is missing or older than what goes into it.
	@if [ ! -s $(DEB_FILE) ] || [ -n "$$(cd $(DEBBOOT_DIR) && find contrib scripts/deb Sources profiles -newer $(DEB_FILE) -print -quit)" ]; then \
	  $(MAKE) --no-print-directory deb ARCH=$(ARCH); fi
	$(DEBBOOT_DIR)/scripts/debboot/run.sh $(DEB_FILE)

deb-boot-clean: ## drop the cached deb-boot images
	rm -rf --one-file-system $(DEBBOOT_CACHE)
