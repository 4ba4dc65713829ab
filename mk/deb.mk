# Debian packages: the release binary (Swift runtime inside), its systemd units, settings and
# man page in ibeacon_VERSION_ARCH.deb, for amd64 (the release build) and arm64 (Raspberry Pi
# OS 64-bit: cross-built with Debian's own Swift, scripts/deb/cross.sh). Included by the main
# Makefile.
#
#   make deb                     ibeacon_VERSION_amd64.deb from `make build`
#   make deb ARCH=arm64          ibeacon_VERSION_arm64.deb (Debian unstable's swiftlang against a
#                                Debian 13 arm64 sysroot; toolchain fetched once from Debian)
#   make deb-test                install it into clean Debian 12 and 13 chroots (arm64: 13 under
#                                qemu-user) and run it there: scripts/deb/test.sh
#   make deb-prepare DEB_PREPARE_ARCHS="amd64 arm64"
#                                fetch the roots and toolchain ahead (scripts/deb/prepare.sh)
#   make deb-clean               drop the cached roots and toolchain ($(DEB_CACHE))
#
# Everything fetched (mmdebstrap roots, .debs, the cross toolchain) is cached in DEB_CACHE,
# outside the clone; with an empty cache it is fetched again from Debian's archive.

DEB_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
HOST_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
ARCH ?= $(HOST_ARCH)
DEB_CACHE ?= /var/cache/ibeacon-deb
DEB_OUT ?= $(DEB_ROOT)
# The version is written once, in VERSION (ProgramInfo.version agrees: tests/e2e/test_one_place.py).
DEB_VERSION := $(shell cat $(DEB_ROOT)/VERSION)
DEB_FILE := $(DEB_OUT)/ibeacon_$(DEB_VERSION)_$(ARCH).deb
DEB_SUITES_amd64 ?= bookworm trixie
DEB_SUITES_arm64 ?= trixie
DEB_SUITES ?= $(DEB_SUITES_$(ARCH))
DEB_HOST_PACKAGES := dpkg-dev mmdebstrap chrpath
export DEB_CACHE

ifeq ($(ARCH),$(HOST_ARCH))
DEB_BINARY := $(DEB_ROOT)/.build/release/ibeacon
DEB_BINARY_PREREQ := build
DEB_SHLIBS_ROOT :=
else
DEB_BINARY := $(DEB_ROOT)/.build/deb-$(ARCH)/ibeacon
DEB_BINARY_PREREQ := deb-cross
DEB_SHLIBS_ROOT := --shlibs-root $(DEB_CACHE)/sysroot/trixie-$(ARCH)
endif
# The man page is the repository's (docs/ibeacon.1, `make man`; `make man-check` in lint keeps it
# matching the binary's help): one page for every architecture, nothing to run under qemu-user.
DEB_MANUAL := $(DEB_ROOT)/docs/ibeacon.1

.PHONY: deb deb-cross deb-deps deb-prepare deb-test deb-lint deb-clean

# Fetch and prepare what deb and deb-test need for these architectures (roots, toolchain), in
# parallel; nothing to do with a full cache. .ci/run runs it in the background from its start.
DEB_PREPARE_ARCHS ?= $(ARCH)
deb-prepare: deb-deps ## fetch the roots and toolchain deb and deb-test need, for DEB_PREPARE_ARCHS, in parallel
	$(DEB_ROOT)/scripts/deb/prepare.sh $(DEB_PREPARE_ARCHS)

# The host's own packages for all of the above (apt on the host: run it before anything else
# installs packages at the same time, as .ci/run does before deb-prepare goes to the background).
deb-deps: ## install the host packages deb, deb-test and deb-prepare need (mmdebstrap, qemu-user, lintian)
	$(call apt_install,$(DEB_HOST_PACKAGES) qemu-user-static binfmt-support lintian)

deb-cross:
	$(DEB_ROOT)/scripts/deb/cross.sh $(ARCH) $(DEB_BINARY)

deb: $(DEB_BINARY_PREREQ) ## ibeacon_VERSION_ARCH.deb (ARCH=amd64 default, ARCH=arm64 cross-built); lintian checks it
	$(call apt_install,$(DEB_HOST_PACKAGES))
	$(DEB_ROOT)/scripts/deb/build.sh --arch $(ARCH) --binary $(DEB_BINARY) --manual $(DEB_MANUAL) \
	  --out $(DEB_OUT) $(DEB_SHLIBS_ROOT)
	@$(MAKE) --no-print-directory deb-lint ARCH=$(ARCH)

# No error from lintian; warnings and notes are printed (contrib/debian/lintian-overrides
# says why each override is there).
deb-lint:
	$(call apt_install,lintian)
	lintian --fail-on error --no-tag-display-limit $(DEB_FILE)

deb-test: ## install the .deb into clean Debian chroots (mmdebstrap) and run it there
	@test -s $(DEB_FILE) || { echo "no $(DEB_FILE): make deb ARCH=$(ARCH) first"; exit 1; }
	@for suite in $(DEB_SUITES); do $(DEB_ROOT)/scripts/deb/test.sh $$suite $(DEB_FILE) || exit 1; done

deb-clean: ## drop the cached Debian roots and cross toolchain ($(DEB_CACHE))
	rm -rf --one-file-system $(DEB_CACHE)
