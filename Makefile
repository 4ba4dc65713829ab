# ibeacon — build, test and install. `make help` lists the targets.
SHELL := /bin/bash
REPO := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
PREFIX ?= /usr/local
SWIFT ?= swift
VENV ?= .venv
PYTHON := $(VENV)/bin/python
APT_PACKAGES := libbluetooth-dev libmosquitto-dev pkg-config
# What the tests run besides the binary: tshark (BTSnoopTests in the unit suite, the capture
# tests), mosquitto, setcap, openssl, and Debian's python3 with venv for the virtualenv.
TEST_APT_PACKAGES := tshark libcap2-bin mosquitto mosquitto-clients openssl
VENV_APT_PACKAGES := python3 python3-venv
# The shared third-party captures (btsnoop logs and their SOURCES.md) the capture tests, the unit
# suite and deb-test read: this one setting, by default shared/captures beside the repository,
# else beside the checkout this one was cloned from when that is a local path (a fresh-clone CI
# run: `git clone . /tmp/x`); a test that cannot find them fails and says to set it.
CAPTURES_BESIDE_ORIGIN := $(shell git -C $(REPO) remote get-url origin 2>/dev/null | sed -n 's|^file://||; /^\//s|$$|/../shared/captures|p')
IBEACON_CAPTURES ?= $(abspath $(firstword $(wildcard $(REPO)/../shared/captures $(CAPTURES_BESIDE_ORIGIN)) \
	$(REPO)/../shared/captures))
export IBEACON_CAPTURES
PROFILE ?= profiles/store12.json
DEVICE ?= hci0

.PHONY: all help deps test-deps venv-deps build debug venv test test-loaded unit e2e lint man man-check format install uninstall demo run bench fuzz clean

all: deps build ## install missing build dependencies, then build the release binary

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s "$$(printf '\t')"

# Installs missing Debian packages when root; otherwise prints the exact command and fails
# (scripts/debian/packages.sh, the one helper the VM and packaging scripts use too).
define apt_install
	@$(REPO)/scripts/debian/packages.sh $(1)
endef

deps: ## install the Debian packages needed to build (libbluetooth-dev, libmosquitto-dev)
	$(call apt_install,$(APT_PACKAGES))

# One check for everything the tests need, so that a user without root is told the whole
# command at once, before anything is built.
test-deps: ## install the Debian packages needed to build and test (tshark, mosquitto, python3-venv)
	$(call apt_install,$(APT_PACKAGES) $(TEST_APT_PACKAGES) $(VENV_APT_PACKAGES))

venv-deps:
	$(call apt_install,$(VENV_APT_PACKAGES))

# Release builds link the Swift runtime statically: the binary runs on a machine without the
# Swift toolchain, keeps no $ORIGIN rpath (file capabilities ignore those), and starts with half
# the resident memory (BENCHMARKS.md). They are stripped (--strip-all: 17 MB instead of 33 MB,
# crash backtraces show addresses only); `make build STRIP=` keeps the symbols and debug info.
STRIP ?= -Xlinker --strip-all
RELEASE_FLAGS := -c release --static-swift-stdlib $(STRIP)

build: deps ## release build: .build/release/ibeacon (Swift runtime linked in)
	$(SWIFT) build $(RELEASE_FLAGS) --product ibeacon

debug: deps ## debug build: .build/debug/ibeacon (what the tests run)
	$(SWIFT) build --product ibeacon

$(VENV)/.ok: tests/requirements.txt | venv-deps
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
	touch $@

venv: $(VENV)/.ok ## the Python virtualenv with Bumble, for tests and the demo

# In parallel: the estimator's CPU-bound simulations run on a thread of their own
# (`@Suite(.ownThread)`), and controller-client timeouts in the tests run on a ManualClock.
# Every test target installs what its tests need before building anything (BTSnoopTests in
# the unit suite runs tshark).
unit: test-deps ## Swift unit and CLI tests
	$(SWIFT) build --product ibeacon
	$(SWIFT) test

# The end-to-end tests mostly wait for the emulated radio (advertising intervals, Apple's 10 s
# calibrations, timeouts), so they run in $(E2E_JOBS) pytest-xdist workers, test by test (not file
# by file: the long calibration files would make the critical path). Each test owns its harness,
# broker, profiles and ports. Measured on 2 cores: 597 s file by file with 4 workers, 1,017 s
# with one. E2E_JOBS=1 runs them one after the other; E2E_ARGS adds pytest arguments.
E2E_JOBS ?= 4
E2E_ARGS ?=
e2e: test-deps venv debug ## end-to-end tests against the Bumble emulated controller
	IBEACON_BIN=$(CURDIR)/.build/debug/ibeacon $(PYTHON) -m pytest -q -n $(E2E_JOBS) --dist load $(E2E_ARGS) tests/e2e

test: test-deps unit e2e ## everything that runs without a Bluetooth kernel: unit, CLI and end-to-end tests

LOAD_RUNS ?= 5
LOAD_HOGS ?= 2
test-loaded: ## make test $(LOAD_RUNS) times in a row beside $(LOAD_HOGS) CPU hogs; stops at the first failure
	scripts/load-series.sh $(LOAD_RUNS) $(LOAD_HOGS)

# Functions of every target (the CLI, the libraries, the test support, the tools) stay under 60
# code lines: a longer one is split into named steps (scripts/function-length.py says which and
# how it counts).
lint: venv ## swift format lint --strict with the checked-in .swift-format; pyflakes; function length; no system-call imports in the CLI
	$(SWIFT) format lint --strict --recursive Sources Tests Package.swift
	$(PYTHON) -m pyflakes tests scripts
	$(PYTHON) scripts/function-length.py --max 60 Sources
	$(PYTHON) scripts/thin-cli.py Sources/ibeacon
	$(MAKE) --no-print-directory man-check

# The man page, docs/ibeacon.1: swift-argument-parser's generate-manual from the binary's own
# help (every subcommand, its options and their help), one page. `make man` writes it after a
# change to the help; `make man-check` (part of lint) fails when it no longer matches the help.
# The date line (.Dd) is the last commit's and is not compared.
MANPAGE := docs/ibeacon.1
define generate_manual
	$(SWIFT) build --product generate-manual
	@out=$$(mktemp -d) && .build/debug/generate-manual .build/debug/ibeacon --section 1 \
	  --date $$(date -u -d @$$(git log -1 --format=%ct 2>/dev/null || date +%s) +%F) --output-directory $$out >/dev/null && \
	  sed -i 's/^$$/.Pp/' $$out/ibeacon.1 && $(1) && rm -rf $$out
endef

man: debug ## regenerate the man page docs/ibeacon.1 from the binary's help
	$(call generate_manual,cp $$out/ibeacon.1 $(MANPAGE))

man-check: debug ## fail if docs/ibeacon.1 does not match the binary's help (run make man)
	$(call generate_manual,{ diff -u -I '^\.Dd ' $(MANPAGE) $$out/ibeacon.1 || { echo "$(MANPAGE) does not match the help: run make man" >&2; rm -rf $$out; exit 1; }; })

format: ## reformat the sources in place
	$(SWIFT) format --in-place --recursive Sources Tests Package.swift

# File capabilities for the installed binary. Next to bluetoothd (Debian, Ubuntu, Raspberry Pi
# OS) every command on hciN goes through the kernel's management interface and needs
# cap_net_admin only: the default. Raw HCI (raw:hciN, and hciN on a box without bluetoothd,
# where the kernel has LE off or the adapter powered off) needs cap_net_raw too:
#   make install CAPS=cap_net_raw,cap_net_admin
CAPS ?= cap_net_admin

install: build ## install to $(PREFIX)/bin, grant capabilities ($(CAPS)), install the systemd unit
	install -D -m 0755 .build/release/ibeacon $(DESTDIR)$(PREFIX)/bin/ibeacon
	install -D -m 0644 $(MANPAGE) $(DESTDIR)$(PREFIX)/share/man/man1/ibeacon.1
	@# As the package does: the capability is root's and group ibeacon's only (root:ibeacon 0750);
	@# the units add that group (SupplementaryGroups=ibeacon), so it must exist.
	@if [ "$$(id -u)" = 0 ]; then \
	  getent group ibeacon >/dev/null || groupadd --system ibeacon; \
	  chown root:ibeacon $(DESTDIR)$(PREFIX)/bin/ibeacon && chmod 0750 $(DESTDIR)$(PREFIX)/bin/ibeacon; \
	fi
	@if command -v setcap >/dev/null && setcap $(CAPS)+ep $(DESTDIR)$(PREFIX)/bin/ibeacon 2>/dev/null; then \
	  echo "granted $(CAPS) to $(PREFIX)/bin/ibeacon (hciN through the kernel needs cap_net_admin only; raw HCI: make install CAPS=cap_net_raw,cap_net_admin)"; \
	else \
	  echo "could not grant capabilities; run: sudo setcap $(CAPS)+ep $(PREFIX)/bin/ibeacon"; \
	fi
	@if [ -f contrib/ibeacon@.service ]; then \
	  sed 's|@BINDIR@|$(PREFIX)/bin|g' contrib/ibeacon@.service > ibeacon@.service.tmp && \
	  install -D -m 0644 ibeacon@.service.tmp $(DESTDIR)/etc/systemd/system/ibeacon@.service && rm -f ibeacon@.service.tmp && \
	  echo "installed /etc/systemd/system/ibeacon@.service (profiles go in /etc/ibeacon/NAME.json)"; \
	fi
	@if [ -f contrib/ibeacon-monitor@.service ]; then \
	  sed 's|@BINDIR@|$(PREFIX)/bin|g' contrib/ibeacon-monitor@.service > ibeacon-monitor@.service.tmp && \
	  install -D -m 0644 ibeacon-monitor@.service.tmp $(DESTDIR)/etc/systemd/system/ibeacon-monitor@.service && \
	  rm -f ibeacon-monitor@.service.tmp && \
	  echo "installed /etc/systemd/system/ibeacon-monitor@.service (regions and hook go in /etc/ibeacon/NAME.monitor)"; \
	fi
	@if [ ! -e $(DESTDIR)/etc/default/ibeacon ]; then \
	  install -D -m 0600 contrib/ibeacon.default $(DESTDIR)/etc/default/ibeacon && \
	  echo "installed /etc/default/ibeacon (device and MQTT settings, all commented out)"; \
	fi

uninstall: ## remove what make install installed (binary, man page, systemd units)
	rm -f $(DESTDIR)$(PREFIX)/bin/ibeacon $(DESTDIR)$(PREFIX)/share/man/man1/ibeacon.1 \
	  $(DESTDIR)/etc/systemd/system/ibeacon@.service \
	  $(DESTDIR)/etc/systemd/system/ibeacon-monitor@.service

run: build ## advertise $(PROFILE) on $(DEVICE); falls back to the emulated demo without an adapter
	@scripts/run.sh "$(PROFILE)" "$(DEVICE)"

demo: build venv ## advertise $(PROFILE) to the emulated controller; an independent scanner prints what a phone decodes
	@scripts/demo.sh "$(PROFILE)"

clean: ## remove the build directory and the virtualenv
	rm -rf .build $(VENV)

# The kernel-path tests (mk/vm.mk) run the release binary, and must not pass without it.
VM_TEST_PREREQS := build
IBEACON_REQUIRE_BIN := 1

-include mk/*.mk
