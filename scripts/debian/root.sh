# shellcheck shell=bash
# The Debian-root toolkit: one way to make a clean Debian root, for the packaging scripts
# (scripts/deb: the test roots, the arm64 cross toolchain and sysroot) and the fresh-machine check
# (scripts/fresh/base.sh: `make test` on a clean Debian 12). Source it; it defines log and die
# unless the caller already has them (ROOT_LOG names the messages' prefix, default "debian").
#
# One maker, mmdebstrap, rather than debootstrap: apt on the host resolves and downloads and only
# dpkg and the maintainer scripts run in the root, so a foreign architecture is fast (trixie arm64
# under qemu-user: 430 s from nothing, where debootstrap, which runs its whole second stage under
# emulation, took 2025 s); it writes a tarball in one step (cached, unpacked per run, nothing to
# undo); it keeps apt's lists on request (a test needs no `apt-get update`); and its minbase is
# debootstrap's (Essential, Priority: required, apt). The booted image of `make deb-boot`
# (scripts/debboot/image.sh) is made by the same make_root.
#
# DEB_CACHE (default /var/cache/ibeacon-deb) holds
#   rootfs/SUITE-ARCH.tar   a clean minbase system with apt's lists, as mmdebstrap left it (callers
#                           unpack a copy)
#   debs/SUITE-ARCH/        the .debs apt fetched there (bind-mounted as apt's archive cache)
#   toolchain/, sysroot/    the arm64 cross toolchain (scripts/deb/cross.sh)
# Nothing there is needed: with an empty cache everything is fetched again from Debian's archive.

DEB_CACHE=${DEB_CACHE:-/var/cache/ibeacon-deb}
DEB_MIRROR=${DEB_MIRROR:-http://deb.debian.org/debian}
DEBIAN_TOOLKIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

declare -F log >/dev/null || log() { echo "${ROOT_LOG:-debian}: $*" >&2; }
declare -F die >/dev/null || die() { echo "${ROOT_LOG:-debian}: error: $*" >&2; exit 1; }

# Host tools, installed from Debian when missing (root only): scripts/debian/packages.sh.
need_host_packages() {
  "$DEBIAN_TOOLKIT/packages.sh" --no-recommends --for "${ROOT_LOG:-debian}" "$@" >&2 ||
    die "missing host packages: $*"
}
# Foreign architectures run through qemu-user; binfmt_misc must know the interpreter.
need_qemu() {
  local arch=$1
  [ "$arch" = "$(dpkg --print-architecture)" ] && return 0
  need_host_packages qemu-user-static binfmt-support
  mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  local name
  case $arch in arm64) name=qemu-aarch64 ;; *) die "no qemu mapping for $arch" ;; esac
  [ -e "/proc/sys/fs/binfmt_misc/$name" ] || update-binfmts --enable "$name" ||
    die "binfmt for $name not registered"
}

# The mounts a chroot needs; undone by chroot_umount (also from an EXIT trap).
chroot_mount() {
  local root=$1
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  mountpoint -q "$root/sys" || mount -t sysfs sysfs "$root/sys"
  mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
  mountpoint -q "$root/dev/pts" || mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" 2>/dev/null || true
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # No daemon starts inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"
}

chroot_umount() {
  local root=$1 m
  [ -d "$root" ] || return 0
  # Deepest first; lazily, so a process that left a file open cannot keep /dev bound.
  for m in $(findmnt -rn -o TARGET | grep -F "$(realpath "$root")/" | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
}

# Removes a chroot tree, never through a mount still bound into it.
remove_root() {
  local root=$1
  [ -d "$root" ] || return 0
  chroot_umount "$root"
  if findmnt -rn -o TARGET | grep -qF "$(realpath "$root")/"; then
    die "$root still has mounts; not removing it"
  fi
  rm -rf --one-file-system "$root"
}

in_root() {
  local root=$1
  shift
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"
}

# The one mmdebstrap call: a minbase SUITE for ARCH into TARGET (a directory, or a tarball with
# --format=tar), from DEB_MIRROR, its output in LOG (the last lines shown on failure); more
# mmdebstrap options (--include, --customize-hook, ...) after LOG. Host tools installed first.
make_root() {
  local suite=$1 arch=$2 target=$3 logfile=$4
  shift 4
  need_host_packages mmdebstrap
  need_qemu "$arch"
  mmdebstrap --variant=minbase --arch="$arch" --aptopt='Acquire::Languages "none"' "$@" \
    "$suite" "$target" "$DEB_MIRROR" >"$logfile" 2>&1 || { tail -20 "$logfile" >&2; return 1; }
}

# The cached tarball of a clean minbase SUITE for ARCH (made once by mmdebstrap; `make deb-clean`
# drops it). apt's package lists are kept in the tarball, so a test needs no `apt-get update` (a
# minute or more under qemu).
rootfs_tarball() {
  local suite=$1 arch=$2
  local tar="$DEB_CACHE/rootfs/$suite-$arch.tar" made_by="mmdebstrap minbase, apt lists kept"
  mkdir -p "$DEB_CACHE/rootfs"
  # One maker at a time (scripts/deb/prepare.sh runs several at once); the others wait for it.
  local lock
  exec {lock}>"$tar.lock"
  flock "$lock"
  # A tarball made another way (debootstrap, before: no lists) is made again.
  if [ ! -s "$tar" ] || [ "$(cat "$tar.made-by" 2>/dev/null)" != "$made_by" ]; then
    log "mmdebstrap $suite $arch (once; cached in $tar)"
    local t0=$SECONDS
    make_root "$suite" "$arch" "$tar.part" "$DEB_CACHE/rootfs/$suite-$arch.log" --format=tar \
      --skip=cleanup/apt/lists --aptopt='Acquire::Check-Valid-Until "false"' ||
      { rm -f "$tar.part"; die "mmdebstrap $suite $arch failed"; }
    mv "$tar.part" "$tar"
    echo "$made_by" >"$tar.made-by"
    log "mmdebstrap $suite $arch: $((SECONDS - t0)) s"
  fi
  exec {lock}>&-
  echo "$tar"
}

# A clean SUITE root for ARCH in DIR (whatever was there is removed first), unpacked from the
# cached tarball; nothing mounted. The one way every caller gets a clean Debian root.
unpack_root() {
  local suite=$1 arch=$2 dir=$3 tar
  tar=$(rootfs_tarball "$suite" "$arch")
  remove_root "$dir"
  mkdir -p "$dir"
  tar -C "$dir" --numeric-owner --xattrs -xf "$tar"
}

# A fresh root from the cached tarball in DIR, apt's .deb cache shared with earlier runs.
fresh_root() {
  local suite=$1 arch=$2 root=$3
  unpack_root "$suite" "$arch" "$root"
  chroot_mount "$root"
  mkdir -p "$DEB_CACHE/debs/$suite-$arch"
  mount --bind "$DEB_CACHE/debs/$suite-$arch" "$root/var/cache/apt/archives"
  apt_config "$root"
}

# Keep what apt downloads for the next run. Unstable's Release file says it is valid for a
# week; a mirror that is a little behind must not stop the toolchain install.
apt_config() {
  local root=$1
  cat >"$root/etc/apt/apt.conf.d/01ibeacon-deb" <<'APT'
Binary::apt::APT::Keep-Downloaded-Packages "true";
Acquire::Check-Valid-Until "false";
Acquire::Languages "none";
APT
}

# A root kept in DIR (toolchains, sysroots): made from the cached clean SUITE tarball, then
# SETUP (a shell snippet run inside it) once; made again when SETUP changes. Unmounted on return.
kept_root() {
  local suite=$1 arch=$2 dir=$3 setup=$4
  local stamp="$dir/.ibeacon-setup" sum
  sum=$(printf '%s' "$setup" | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    return 0
  fi
  local t0=$SECONDS
  log "preparing $dir (once; $suite $arch)"
  fresh_root "$suite" "$arch" "$dir"
  if ! in_root "$dir" sh -ec "$setup" >"$dir.log" 2>&1; then
    tail -30 "$dir.log" >&2
    chroot_umount "$dir"
    die "preparing $dir failed (log: $dir.log)"
  fi
  chroot_umount "$dir"
  echo "$sum" >"$stamp"
  log "prepared $dir: $((SECONDS - t0)) s"
}
