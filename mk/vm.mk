# Kernel-path tests: the real Linux Bluetooth stack (BlueZ btvirt virtual controllers) in a
# QEMU VM (TCG). Included by the main Makefile; also usable alone: make -f mk/vm.mk test-kernel
#
#   make test-kernel                     deps + cached kernel/initramfs + tests/vm/guest-test.sh
#   make test-kernel VM_SCENARIOS="controllers raw_advertising"
#   make test-kernel VM_KERNEL=5.10 VM_SCENARIOS=…   Debian 11's kernel (6.12: Debian 13's)
#   make vm-run VM_CMD="hciconfig -a"    any command in the VM (as root, in the repo)
#   make vm-clean                        drop the .vm/ cache (kernel, initramfs)
#
# Variables: IBEACON_BIN (binary under test, built on the host beforehand; default
# .build/release/ibeacon), IBEACON_REQUIRE_BIN=1 (missing binary fails instead of skipping),
# VM_TIMEOUT (seconds for the whole VM run, default 480), VM_TEST_PREREQS (targets to make first,
# e.g. the release build), VM_SCENARIOS (subset; `tests/vm/guest-test.sh --list`), VM_KERNEL
# (5.10 or 6.12: that Debian release's linux-image from the Debian archive; empty: this host's).

VM_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
VM_TIMEOUT ?= 480
VM_SCENARIOS ?=
VM_TEST_PREREQS ?=
VM_CMD ?= uname -a
VM_KERNEL ?=
export VM_KERNEL
IBEACON_BIN ?= .build/release/ibeacon
IBEACON_REQUIRE_BIN ?= 0
# Theengs Gateway (PyPI) for kernel_stable_address, in a virtualenv of its own.
THEENGS_VENV ?= $(VM_ROOT)/.venv-theengs

.PHONY: test-kernel vm-deps vm-prepare vm-run vm-clean venv-theengs

vm-deps:
	@$(VM_ROOT)/scripts/vm/deps.sh

vm-prepare: vm-deps
	@$(VM_ROOT)/scripts/vm/prepare.sh

$(THEENGS_VENV)/.ok: $(VM_ROOT)/tests/vm/requirements-theengs.txt
	python3 -m venv $(THEENGS_VENV)
	$(THEENGS_VENV)/bin/pip install -q --disable-pip-version-check -r $<
	touch $@

venv-theengs: $(THEENGS_VENV)/.ok ## Theengs Gateway for the kernel VM scenario kernel_stable_address

test-kernel: vm-prepare $(THEENGS_VENV)/.ok $(VM_TEST_PREREQS) ## the real Linux Bluetooth stack (Debian's kernel, BlueZ, bluetoothd) in a QEMU VM
	@VM_SKIP_PREPARE=1 IBEACON_BIN='$(IBEACON_BIN)' IBEACON_REQUIRE_BIN='$(IBEACON_REQUIRE_BIN)' \
	  $(VM_ROOT)/scripts/vm/run.sh --timeout $(VM_TIMEOUT) -C $(VM_ROOT) -- tests/vm/guest-test.sh $(VM_SCENARIOS)

vm-run: vm-prepare ## any command in the kernel-test VM: make vm-run VM_CMD="hciconfig -a"
	@VM_SKIP_PREPARE=1 $(VM_ROOT)/scripts/vm/run.sh --timeout $(VM_TIMEOUT) -C $(VM_ROOT) -- sh -c '$(VM_CMD)'

vm-clean: ## drop the VM cache .vm/ (kernel, initramfs)
	rm -rf $(VM_ROOT)/.vm
