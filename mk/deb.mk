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
DEB_VERSION := $(shell sed -n 's/^ *public static let version = "\(.*\)"$$/\1/p' $(DEB_ROOT)/Sources/IBeaconCore/MQTT.swift)
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
# generate-manual runs the ARCH binary (qemu-user through binfmt) with the sysroot's loader.
DEB_RUN_ENV := QEMU_LD_PREFIX=$(DEB_CACHE)/sysroot/trixie-$(ARCH)
endif
DEB_MANUAL := $(DEB_ROOT)/.build/deb-$(ARCH)/ibeacon.1

.PHONY: deb deb-cross deb-deps deb-manual deb-prepare deb-test deb-lint deb-clean

# Fetch and prepare what deb and deb-test need for these architectures (roots, toolchain), in
# parallel; nothing to do with a full cache. .ci/run runs it in the background from its start.
DEB_PREPARE_ARCHS ?= $(ARCH)
deb-prepare: deb-deps ## fetch the roots and toolchain deb and deb-test need, for DEB_PREPARE_ARCHS, in parallel
	$(DEB_ROOT)/scripts/deb/prepare.sh $(DEB_PREPARE_ARCHS)

# The host's own packages for all of the above (apt on the host: run it before anything else
# installs packages at the same time, as .ci/run does before deb-prepare goes to the background).
deb-deps:
	$(call apt_install,$(DEB_HOST_PACKAGES) qemu-user-static binfmt-support lintian)

deb-cross:
	$(DEB_ROOT)/scripts/deb/cross.sh $(ARCH) $(DEB_BINARY)

# The man page: swift-argument-parser's generate-manual from the binary's own help (every
# subcommand, its options and their help), one page, dated by the last commit.
deb-manual: $(DEB_BINARY_PREREQ)
	$(call apt_install,$(DEB_HOST_PACKAGES))
	$(SWIFT) build $(RELEASE_FLAGS) --product generate-manual
	mkdir -p $(dir $(DEB_MANUAL))
	$(DEB_RUN_ENV) $(DEB_ROOT)/.build/release/generate-manual $(DEB_BINARY) --section 1 --date $$(date -u -d @$$(git log -1 --format=%ct) +%F) \
	  --output-directory $(dir $(DEB_MANUAL)) >/dev/null
	sed -i 's/^$$/.Pp/' $(DEB_MANUAL)  # a blank line in the help text is a paragraph break

deb: deb-manual ## ibeacon_VERSION_ARCH.deb (ARCH=amd64 default, ARCH=arm64 cross-built); lintian checks it
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

deb-clean:
	rm -rf --one-file-system $(DEB_CACHE)
