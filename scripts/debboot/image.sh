#!/bin/bash
# Builds (once, cached) the Debian 12 amd64 disk image `make deb-boot` boots: systemd, dbus,
# bluez (bluetoothd), bluez-test-tools (btvirt), bluez-hcidump, Debian's 6.1 kernel (hci_vhci),
# mosquitto and the package's runtime dependencies, and nothing of ibeacon's: the package is
# installed by apt inside the booted system (scripts/debboot/guest.sh).
#
#   $DEBBOOT_CACHE/bookworm-amd64.img     raw ext4 root filesystem (never written by a run: each
#                                          run boots a qcow2 overlay on it)
#   $DEBBOOT_CACHE/vmlinuz, initrd.img     the image's own kernel and initramfs, for -kernel
#   $DEBBOOT_CACHE/image.stamp             written last: a complete cache (holds this script's hash)
#
# The one thing of the test's in the image: debboot-test.service, enabled, which mounts the
# host's 9p share (tag "debboot") and runs guest.sh from it, output on the serial console.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEBBOOT_CACHE=${DEBBOOT_CACHE:-/var/cache/ibeacon-debboot}
DEB_MIRROR=${DEB_MIRROR:-http://deb.debian.org/debian}
log() { echo "debboot-image: $*" >&2; }
die() { echo "debboot-image: error: $*" >&2; exit 1; }

# Runtime dependencies of the package (Depends of ibeacon_*.deb, plus adduser for postinst's
# addgroup and libcap2-bin, Recommends, for setcap) and the test's tools.
PACKAGES="systemd systemd-sysv dbus udev kmod iproute2 procps util-linux bsdutils
  linux-image-amd64 initramfs-tools bluez bluez-test-tools bluez-hcidump
  mosquitto mosquitto-clients
  libc6 libbluetooth3 libmosquitto1 libstdc++6 libgcc-s1 zlib1g adduser libcap2-bin passwd"
want="$(cat "${BASH_SOURCE[0]}" "$here/debboot-test.service" | sha256sum | cut -c1-16)"

mkdir -p "$DEBBOOT_CACHE"
exec 9>"$DEBBOOT_CACHE/.lock"
flock -w 1800 9 || die "another image.sh holds $DEBBOOT_CACHE/.lock"
if [ "$(cat "$DEBBOOT_CACHE/image.stamp" 2>/dev/null)" = "$want" ] && [ -s "$DEBBOOT_CACHE/bookworm-amd64.img" ]; then
  log "cached: $DEBBOOT_CACHE/bookworm-amd64.img"
  exit 0
fi
rm -f "$DEBBOOT_CACHE/image.stamp"
command -v mmdebstrap >/dev/null && command -v mkfs.ext4 >/dev/null || die "needs mmdebstrap and e2fsprogs"

t0=$SECONDS
root=$DEBBOOT_CACHE/root
rm -rf --one-file-system "$root"
log "mmdebstrap bookworm amd64 into $root (log: $DEBBOOT_CACHE/mmdebstrap.log)"
# shellcheck disable=SC2086
mmdebstrap --variant=minbase --arch=amd64 --include="$(echo $PACKAGES | tr ' ' ',')" \
  --customize-hook='echo debboot > "$1/etc/hostname"' \
  --customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n" > "$1/etc/fstab"' \
  --customize-hook='chroot "$1" systemctl set-default multi-user.target' \
  --customize-hook='chroot "$1" passwd -d root' \
  --customize-hook="install -m 0644 '$here/debboot-test.service' \"\$1/etc/systemd/system/debboot-test.service\"" \
  --customize-hook='chroot "$1" systemctl enable debboot-test.service' \
  --customize-hook='chroot "$1" systemctl mask serial-getty@ttyS0.service apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service' \
  bookworm "$root" "$DEB_MIRROR" >"$DEBBOOT_CACHE/mmdebstrap.log" 2>&1 ||
  { tail -20 "$DEBBOOT_CACHE/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
log "mmdebstrap: $((SECONDS - t0)) s"
cp "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)" "$DEBBOOT_CACHE/vmlinuz"
cp "$(ls "$root"/boot/initrd.img-* | sort -V | tail -1)" "$DEBBOOT_CACHE/initrd.img"
img=$DEBBOOT_CACHE/bookworm-amd64.img
rm -f "$img"
truncate -s 3G "$img"
mkfs.ext4 -q -F -L debboot -d "$root" "$img" || die "mkfs.ext4 -d failed"
rm -rf --one-file-system "$root"
echo "$want" >"$DEBBOOT_CACHE/image.stamp"
log "built $img in $((SECONDS - t0)) s"
