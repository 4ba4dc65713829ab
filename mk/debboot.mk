# make deb-boot: the package, booted. A Debian 12 amd64 system in QEMU (TCG) with systemd as
# PID 1, dbus, bluetoothd, Debian's 6.1 kernel and two btvirt controllers, nothing of ibeacon's in
# its image; inside it, as an operator would: apt install ./ibeacon_VERSION_amd64.deb, the example
# profile into /etc/ibeacon, systemctl enable --now ibeacon@store12 (READY=1), an independent
# scanner on hci1 (btmgmt find + hcidump -R) hears the exact payload, kill -> restart -> one
# beacon, stop -> silent, ibeacon-monitor@store12 with the shipped example, group ibeacon (a user
# outside it cannot run the binary, a member can), systemd-analyze security <= 2.5, no seccomp
# denial; reboot of the same disk: on the air with nobody logged in, bluetooth restart, power
# cycle, upgrade, purge. scripts/debboot/guest.sh prints one PASS/FAIL line per step; the target
# fails on any FAIL. Included by the main Makefile. tests/vm/README.md "deb-boot" has the details.
#
#   make deb-boot                 make deb (if the .deb is missing or older than contrib/, Sources/,
#                                 scripts/deb/, profiles/), build the image (cached),
#                                 boot it twice (scripts/debboot/run.sh)
#   make deb-boot-image           only the image: $(DEBBOOT_CACHE)/bookworm-amd64.img
#   make deb-boot-clean           drop the image cache
#
# Timing, measured on a build host (2 cores, shared with a CI baseline and other jobs; TCG, no KVM):
#   cold   the image: 460 s (mmdebstrap 417 s of it, from deb.debian.org; 3 GB raw ext4, 36 MB
#          initrd); make deb from an empty .build: about 10 min for the release build + 98 s;
#          then the two boots below: about 27 min in all.
#   cached image and .deb present: 4 min 37 s and 5 min 18 s for `make deb-boot` (boot 1: 154-166 s,
#          boot 2: 112-169 s; 33 PASS, 0 FAIL in the last run) with the machine less busy; 8 min 50 s while the CI baseline ran beside it (boot
#          1: 221-349 s); first boot to the test unit about 60 s; +1-2 min for an incremental make deb.

DEBBOOT_CACHE ?= /var/cache/ibeacon-debboot
DEBBOOT_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
export DEBBOOT_CACHE

.PHONY: deb-boot deb-boot-image deb-boot-deps deb-boot-clean

deb-boot-deps:
	$(call apt_install,mmdebstrap e2fsprogs qemu-system-x86 qemu-utils python3)

deb-boot-image: deb-boot-deps
	$(DEBBOOT_DIR)/scripts/debboot/image.sh

deb-boot: deb-boot-image ## boot Debian 12 (systemd, bluetoothd, btvirt) in QEMU; apt install the .deb there and test the units as an operator
	@# The .deb again when it is missing or older than what goes into it.
	@if [ ! -s $(DEB_FILE) ] || [ -n "$$(cd $(DEBBOOT_DIR) && find contrib scripts/deb Sources profiles -newer $(DEB_FILE) -print -quit)" ]; then \
	  $(MAKE) --no-print-directory deb ARCH=amd64; fi
	$(DEBBOOT_DIR)/scripts/debboot/run.sh $(DEB_FILE)

deb-boot-clean:
	rm -rf --one-file-system $(DEBBOOT_CACHE)
