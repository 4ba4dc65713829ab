#!/bin/bash
# Install the host packages the kernel-path tests need, from Debian, if any is missing.
# Idempotent: does nothing (no apt-get update) when everything is already installed.
# Runs non-interactively (CI=true, no stdin).
set -euo pipefail

# package            why
packages=(
  qemu-system-x86    # the VM (TCG; KVM is not usable on these hosts)
  busybox-static     # the initramfs userland and the guest's PID 1
  kmod               # depmod/modprobe for the unpacked guest kernel (and inside the guest)
  cpio               # packs the initramfs
  xz-utils           # unpacks vmlinux from Debian's XZ-compressed bzImage
  bluez              # hciconfig, hcitool, btmon inside the guest (guest root = host root)
  bluez-test-tools   # btvirt: two linked virtual LE controllers on /dev/vhci
  bluez-hcidump      # hcidump -R: raw HCI bytes, an independent view of what went over the air
  libcap2-bin        # setcap for the capability scenario
  util-linux         # setpriv
  passwd             # useradd
  python3            # Debian's /usr/bin/python3 parses JSON in the guest test
  coreutils          # timeout, stdbuf
)

# scripts/debian/packages.sh: the one "install missing packages" helper (root installs them;
# anyone else is told the apt-get command and fails).
"$(dirname "$0")/../debian/packages.sh" --no-recommends --for vm-deps "${packages[@]}" || exit 1
echo "vm-deps: all ${#packages[@]} packages present"
