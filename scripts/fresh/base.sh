#!/usr/bin/env bash
# A clean Debian 12 root with only what the README assumes: the Swift toolchain's own Debian
# dependencies (swift.org's list for Debian 12: the toolchain itself is bind-mounted from
# /opt/swift at run time) and git. Cached under $FRESH_CACHE/base; rebuilt when this script
# changes. Nothing of the project's own dependencies (libbluetooth-dev, tshark, mosquitto,
# python3-venv...) is installed: `make` must install those itself.
#   scripts/fresh/base.sh            (as root; needs debootstrap, reaches deb.debian.org)
set -euo pipefail
CACHE=${FRESH_CACHE:-/var/cache/ibeacon-fresh}
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
# swift.org, "Installing Swift" for Debian 12 (the toolchain's prerequisites), and git.
SWIFT_DEPS="binutils-gold libicu-dev libcurl4-openssl-dev libedit-dev libsqlite3-dev libncurses-dev
  libpython3-dev libxml2-dev pkg-config uuid-dev tzdata gcc libstdc++-12-dev"
stamp=$(sha256sum <"$0" | cut -c1-16)
base=$CACHE/base
[ -f "$base/.fresh-$stamp" ] && { echo "fresh: cached Debian 12 root $base"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "fresh: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh: needs debootstrap: apt-get install -y debootstrap" >&2; exit 1; }
mkdir -p "$CACHE"
log=$CACHE/debootstrap.log
# The bare debootstrap is kept on its own ($CACHE/minbase): what is added on top can change.
if [ ! -f "$CACHE/minbase/.fresh-minbase" ]; then
  rm -rf "$CACHE/minbase.tmp"
  echo "fresh: debootstrap bookworm (minbase) into $CACHE/minbase"
  debootstrap --variant=minbase bookworm "$CACHE/minbase.tmp" "$MIRROR" >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
  touch "$CACHE/minbase.tmp/.fresh-minbase"
  mv "$CACHE/minbase.tmp" "$CACHE/minbase"
fi
rm -rf "$base.tmp"
cp -a "$CACHE/minbase" "$base.tmp"
rm -f "$base.tmp/.fresh-minbase"
cp /etc/resolv.conf "$base.tmp/etc/resolv.conf"
cat >"$base.tmp/etc/apt/sources.list" <<SRC
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SRC
mount -t proc proc "$base.tmp/proc"
trap 'umount "$base.tmp/proc" 2>/dev/null || true' EXIT
echo "fresh: installing the Swift toolchain's prerequisites and git"
# shellcheck disable=SC2086 # the list is split into words on purpose
chroot "$base.tmp" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -ec "
  apt-get update -q
  apt-get install -y -q --no-install-recommends git make ca-certificates $(echo $SWIFT_DEPS)
  apt-get clean; rm -rf /var/lib/apt/lists/*" >>"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
umount "$base.tmp/proc"; trap - EXIT
# The user who is told what to install; the toolchain on every login's PATH, as swift.org says.
chroot "$base.tmp" useradd -m -s /bin/bash fresh
echo 'export PATH=/opt/swift/usr/bin:$PATH' >"$base.tmp/etc/profile.d/swift.sh"
mkdir -p "$base.tmp/opt/swift" "$base.tmp/opt/swift-packages"
rm -rf "$base"; mv "$base.tmp" "$base"; touch "$base/.fresh-$stamp"
echo "fresh: Debian 12 root ready: $base ($(du -sh "$base" | cut -f1))"
