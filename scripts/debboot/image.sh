#!/bin/bash
# Builds (once, cached) the disk image `make deb-boot` boots for ARCH: amd64 is Debian 12
# (bookworm, kernel 6.1), arm64 Debian 13 (trixie, kernel 6.12; the closest thing to a Raspberry
# Pi here, made under qemu-user). In it: systemd, dbus, bluez (bluetoothd), bluez-test-tools
# (btvirt), bluez-hcidump, Debian's kernel (hci_vhci), mosquitto and the package's runtime
# dependencies, and nothing of ibeacon's: the package is installed by apt inside the booted
# system (scripts/debboot/guest.sh).
#
#   scripts/debboot/image.sh [amd64|arm64]
#
#   $DEBBOOT_CACHE/SUITE-ARCH.img          raw ext4 root filesystem (never written by a run: each
#                                           run boots a qcow2 overlay on it)
#   $DEBBOOT_CACHE/SUITE-ARCH.vmlinuz, SUITE-ARCH.initrd.img
#                                           the image's own kernel and initramfs, for -kernel
#   $DEBBOOT_CACHE/SUITE-ARCH.stamp        written last: a complete image (holds the recipe's hash:
#                                           suite, packages, hooks and the test unit)
#
# The one thing of the test's in the image: debboot-test.service, enabled, which mounts the
# host's 9p share (tag "debboot") and runs guest.sh from it, output on the serial console.
# One build per image at a time ($DEBBOOT_CACHE/SUITE-ARCH.lock); the amd64 and arm64 images can
# be built at once. Made by the Debian-root toolkit's make_root (scripts/debian/root.sh), not from
# its cached minbase tarball: the image's packages come in the same mmdebstrap run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The Debian-root toolkit: make_root (mmdebstrap), the host packages, binfmt for a foreign ARCH.
ROOT_LOG=debboot-image
# shellcheck source=scripts/debian/root.sh
source "$here/../debian/root.sh"
DEBBOOT_CACHE=${DEBBOOT_CACHE:-/var/cache/ibeacon-debboot}

arch=${1:-amd64}
# Debian's arm64 kernel has no hci_vhci (CONFIG_BT_HCIVHCI is not set), so there btvirt's
# controllers reach the kernel the way a Raspberry Pi's own does, over a UART: hci_uart on a pty
# that socat connects to btvirt's server socket (guest.sh).
case $arch in
amd64) suite=bookworm console=ttyS0 extra= ;;
arm64) suite=trixie console=ttyAMA0 extra=socat ;;
*) die "no deb-boot image for $arch (amd64, arm64)" ;;
esac
name=$suite-$arch

# Runtime dependencies of the package (Depends of ibeacon_*.deb, plus adduser for postinst's
# addgroup and libcap2-bin, Recommends, for setcap) and the test's tools.
PACKAGES="systemd systemd-sysv dbus udev kmod iproute2 procps util-linux bsdutils
  linux-image-$arch initramfs-tools bluez bluez-test-tools bluez-hcidump
  mosquitto mosquitto-clients
  libc6 libbluetooth3 libmosquitto1 libstdc++6 libgcc-s1 zlib1g adduser libcap2-bin passwd $extra"
HOOKS=(
  'echo debboot > "$1/etc/hostname"'
  'printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n" > "$1/etc/fstab"'
  'chroot "$1" systemctl set-default multi-user.target'
  'chroot "$1" passwd -d root'
  "install -m 0644 '$here/debboot-test.service' \"\$1/etc/systemd/system/debboot-test.service\""
  'chroot "$1" systemctl enable debboot-test.service'
  "chroot \"\$1\" systemctl mask serial-getty@$console.service apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service"
)
# The image is made again when what goes into it changes, not when a comment here does, nor where
# the checkout is (the hooks name this folder: every fresh clone used to make it again).
want="$({ echo "$name"; echo $PACKAGES; printf '%s\n' "${HOOKS[@]}" | sed "s|$here|SCRIPTS|g"; cat "$here/debboot-test.service"; } | sha256sum | cut -c1-16)"
img=$DEBBOOT_CACHE/$name.img

mkdir -p "$DEBBOOT_CACHE"
exec 9>"$DEBBOOT_CACHE/$name.lock"
# Shared to look, exclusive to make it again: a deb-boot run (scripts/debboot/run.sh) holds it
# shared while it boots the image, so the image never changes under a running boot.
cached() { [ "$(cat "$DEBBOOT_CACHE/$name.stamp" 2>/dev/null)" = "$want" ] && [ -s "$img" ]; }
flock -s -w 3600 9 || die "another image.sh holds $DEBBOOT_CACHE/$name.lock"
if cached; then log "cached: $img"; exit 0; fi
flock -x -w 3600 9 || die "a deb-boot run or another image.sh holds $DEBBOOT_CACHE/$name.lock"
if cached; then log "cached (made meanwhile): $img"; exit 0; fi
rm -f "$DEBBOOT_CACHE/$name.stamp"
command -v mkfs.ext4 >/dev/null || need_host_packages e2fsprogs

t0=$SECONDS
root=$DEBBOOT_CACHE/$name.root
rm -rf --one-file-system "$root"
hooks=()
for h in "${HOOKS[@]}"; do hooks+=(--customize-hook="$h"); done
log "mmdebstrap $suite $arch into $root (log: $DEBBOOT_CACHE/$name.mmdebstrap.log)"
# shellcheck disable=SC2086
make_root "$suite" "$arch" "$root" "$DEBBOOT_CACHE/$name.mmdebstrap.log" \
  --include="$(echo $PACKAGES | tr ' ' ',')" "${hooks[@]}" || die "mmdebstrap failed"
log "mmdebstrap: $((SECONDS - t0)) s"
cp "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)" "$DEBBOOT_CACHE/$name.vmlinuz"
cp "$(ls "$root"/boot/initrd.img-* | sort -V | tail -1)" "$DEBBOOT_CACHE/$name.initrd.img"
rm -f "$img"
truncate -s 3G "$img"
mkfs.ext4 -q -F -L debboot -d "$root" "$img" || die "mkfs.ext4 -d failed"
rm -rf --one-file-system "$root"
echo "$want" >"$DEBBOOT_CACHE/$name.stamp"
log "built $img in $((SECONDS - t0)) s"
