#!/usr/bin/env bash
# A clean Debian 12 root with only what the README assumes: the Swift toolchain's own Debian
# dependencies (swift.org's list for Debian 12: the toolchain itself is bind-mounted from
# /opt/swift at run time) and git. Cached under $FRESH_CACHE/base; rebuilt when this script
# changes. Nothing of the project's own dependencies (libbluetooth-dev, tshark, mosquitto,
# python3-venv...) is installed: `make` must install those itself.
#   scripts/fresh/base.sh            (as root; reaches deb.debian.org)
# The clean root under it is the Debian-root toolkit's (scripts/debian/root.sh: mmdebstrap minbase,
# the tarball cached in $DEB_CACHE/rootfs and shared with the packaging tests).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT_LOG=fresh
# shellcheck source=scripts/debian/root.sh
source "$here/../debian/root.sh"
CACHE=${FRESH_CACHE:-/var/cache/ibeacon-fresh}
MIRROR=${FRESH_MIRROR:-$DEB_MIRROR}
# swift.org, "Installing Swift" for Debian 12 (the toolchain's prerequisites), and git.
SWIFT_DEPS="binutils-gold libicu-dev libcurl4-openssl-dev libedit-dev libsqlite3-dev libncurses-dev
  libpython3-dev libxml2-dev pkg-config uuid-dev tzdata gcc libstdc++-12-dev"
stamp=$( (cat "$0" "$here/../debian/root.sh") | sha256sum | cut -c1-16)
base=$CACHE/base
[ -f "$base/.fresh-$stamp" ] && { echo "fresh: cached Debian 12 root $base"; exit 0; }
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap, chroot)"
mkdir -p "$CACHE"
log=$CACHE/setup.log
echo "fresh: a clean Debian 12 root (scripts/debian/root.sh) into $base.tmp"
unpack_root bookworm amd64 "$base.tmp"
# mmdebstrap's own apt settings are not part of a machine the README is followed on.
rm -f "$base.tmp/etc/apt/apt.conf.d/99mmdebstrap"
cat >"$base.tmp/etc/apt/sources.list" <<SRC
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SRC
trap 'chroot_umount "$base.tmp"' EXIT
chroot_mount "$base.tmp"
echo "fresh: installing the Swift toolchain's prerequisites and git"
# shellcheck disable=SC2086 # the list is split into words on purpose
in_root "$base.tmp" sh -ec "
  apt-get update -q
  apt-get install -y -q --no-install-recommends git make ca-certificates $(echo $SWIFT_DEPS)
  apt-get clean; rm -rf /var/lib/apt/lists/*" >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
chroot_umount "$base.tmp"; trap - EXIT
# Daemons start in the checked root as on a fresh machine (chroot_mount's policy-rc.d is for the
# packaging roots).
rm -f "$base.tmp/usr/sbin/policy-rc.d"
# The user who is told what to install; the toolchain on every login's PATH, as swift.org says.
chroot "$base.tmp" useradd -m -s /bin/bash fresh
echo 'export PATH=/opt/swift/usr/bin:$PATH' >"$base.tmp/etc/profile.d/swift.sh"
mkdir -p "$base.tmp/opt/swift" "$base.tmp/opt/swift-packages"
rm -rf "$base"; mv "$base.tmp" "$base"; touch "$base/.fresh-$stamp"
rm -rf "$CACHE/minbase"  # debootstrap's, before the toolkit
echo "fresh: Debian 12 root ready: $base ($(du -sh "$base" | cut -f1))"
