#!/bin/bash
# Cross-builds the release binary for ARCH (arm64: Raspberry Pi OS 64-bit, Debian 13 arm64) on
# an amd64 machine, with nothing but Debian's archive:
#   - the compiler: Debian unstable's swiftlang (6.2.3; Debian 13's 6.0.3 is too old for
#     Package.swift's tools version 6.1 and the Span API), in a sid amd64 chroot;
#   - the target's C side: a Debian 13 (trixie) root with the ARCH libraries installed through
#     multiarch (libc6-dev, libbluetooth-dev, libmosquitto-dev, libstdc++, crt files), so the
#     binary needs only trixie's glibc — one built against sid's glibc runs on neither 12 nor 13;
#   - the Swift runtime for ARCH: the static libraries and modules of sid's swiftlang ARCH .deb.
# The Swift runtime is linked statically, as in `make build`, and the binary stripped.
#
#   scripts/deb/cross.sh arm64 OUT        writes the binary to OUT
#   scripts/deb/cross.sh arm64 --prepare  only fetches and prepares the toolchain and sysroot
#
# All three are cached in $DEB_CACHE (scripts/deb/lib.sh), and the build directory too (the
# source is always at /src in the chroot, so a new clone reuses the built dependencies).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/deb/lib.sh

arch=${1:?usage: $0 ARCH OUT}
out=${2:?usage: $0 ARCH OUT}
case $arch in
arm64) triple=aarch64-unknown-linux-gnu gnu=aarch64-linux-gnu ;;
*) die "no cross build for $arch (arm64 only)" ;;
esac
toolchain=$DEB_CACHE/toolchain/sid-amd64
runtime=$DEB_CACHE/toolchain/swift-$arch
sysroot=$DEB_CACHE/sysroot/trixie-$arch
scratch=${IBEACON_CROSS_SCRATCH:-$DEB_CACHE/build/$arch}
t0=$SECONDS
need_host_packages mmdebstrap

# The compiler, and the target's Swift runtime taken from the same swiftlang version.
kept_root sid amd64 "$toolchain" "
apt-get update -q
apt-get install -y -q --no-install-recommends swiftlang libc6-dev g++ git ca-certificates pkgconf
dpkg --add-architecture $arch
apt-get update -q
cd /var/cache/apt/archives && apt-get download swiftlang:$arch
mkdir -p /opt/swift-$arch && dpkg-deb -x \$(ls -t swiftlang_*_$arch.deb | head -1) /opt/swift-$arch
"

# The target's libraries and headers (multiarch, in a trixie amd64 root, so nothing runs under
# emulation); dpkg-dev and the target's objdump there compute the package's Depends.
kept_root trixie amd64 "$sysroot" "
dpkg --add-architecture $arch
apt-get update -q
apt-get install -y -q --no-install-recommends libc6-dev:$arch libgcc-14-dev:$arch libstdc++-14-dev:$arch \
  libbluetooth-dev:$arch libmosquitto-dev:$arch dpkg-dev binutils-$gnu
"
log "toolchain and sysroot ready ($((SECONDS - t0)) s)"
[ "$out" = --prepare ] && exit 0

# The build, in the sid chroot: /src the source, /sysroot the target's libraries, /build the
# build directory (cached), /opt/swift-packages the Swift packages (git reads github.com from
# there on these machines; elsewhere SwiftPM fetches them as usual).
src=${IBEACON_CROSS_SRC:-$PWD}
mkdir -p "$scratch" "$toolchain/src" "$toolchain/sysroot" "$toolchain/build"
trap 'chroot_umount "$toolchain"' EXIT
chroot_mount "$toolchain"
mount --bind "$src" "$toolchain/src"
mount --bind "$sysroot" "$toolchain/sysroot"
mount --bind "$scratch" "$toolchain/build"
if [ -d /opt/swift-packages ]; then
  mkdir -p "$toolchain/opt/swift-packages"
  mount --bind -o ro /opt/swift-packages "$toolchain/opt/swift-packages"
fi
rm -f "$toolchain/root/.gitconfig"
git config --get-regexp '^url\..*\.insteadof$' | while read -r key value; do
  git config -f "$toolchain/root/.gitconfig" --add "$key" "$value"
done || true
git config -f "$toolchain/root/.gitconfig" safe.directory '*' 
# The target's Swift runtime where the driver looks for it, in the SDK (usr/lib/swift_static);
# the links resolve inside the toolchain chroot.
for dir in swift swift_static; do
  ln -sfn "/opt/swift-$arch/usr/libexec/swift/lib/$dir" "$sysroot/usr/lib/$dir"
done
log "swift build for $triple with $(in_root "$toolchain" swift --version 2>&1 | head -1)"
t1=$SECONDS
in_root "$toolchain" sh -ec "
cd /src
export PKG_CONFIG_SYSROOT_DIR=/sysroot
export PKG_CONFIG_PATH=/sysroot/usr/lib/$gnu/pkgconfig:/sysroot/usr/share/pkgconfig
export PKG_CONFIG_LIBDIR=\$PKG_CONFIG_PATH
swift build -c release --static-swift-stdlib -Xlinker --strip-all --product ibeacon \
  --disable-local-rpath --scratch-path /build --triple $triple --sdk /sysroot \
  -Xswiftc -sdk -Xswiftc /sysroot -Xswiftc -resource-dir -Xswiftc /sysroot/usr/lib/swift_static -Xswiftc -use-ld=lld ${IBEACON_CROSS_FLAGS:-}
"
bin="$scratch/$triple/release/ibeacon"
[ -x "$bin" ] || bin="$scratch/release/ibeacon"
install -D -m 0755 "$bin" "$out"
log "built $out for $arch: $((SECONDS - t1)) s build, $((SECONDS - t0)) s in all"
