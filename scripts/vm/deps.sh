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

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "vm-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "vm-deps: missing packages: ${missing[*]} — run as root or: apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "vm-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq </dev/null
apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" </dev/null
