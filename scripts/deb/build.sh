#!/bin/bash
# Packs a built ibeacon binary into ibeacon_VERSION_ARCH.deb (make deb runs it).
#
#   scripts/deb/build.sh --arch amd64 --binary .build/release/ibeacon --manual ibeacon.1 --out DIR
#       [--version V]         default: VERSION, the version `ibeacon --version` prints
#       [--shlibs-root DIR]   a Debian root holding the target architecture's libraries
#                             (multiarch, with dpkg-dev) where dpkg-shlibdeps runs: a cross build
#
# Depends is computed by dpkg-shlibdeps and the control file written by dpkg-gencontrol from
# contrib/debian/control; maintainer scripts and lintian overrides are in contrib/debian.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/deb/lib.sh

arch="" binary="" manual="" out="" version="" shlibs_root=""
while [ $# -gt 0 ]; do
  case $1 in
  --arch) arch=$2 ;;
  --binary) binary=$2 ;;
  --manual) manual=$2 ;;
  --out) out=$2 ;;
  --version) version=$2 ;;
  --shlibs-root) shlibs_root=$2 ;;
  *) die "unknown argument $1" ;;
  esac
  shift 2
done
[ -n "$arch" ] && [ -x "$binary" ] && [ -s "$manual" ] && [ -n "$out" ] || die "usage: see the head of $0"
# The one place the version is written: VERSION (ProgramInfo.version, `ibeacon --version`, agrees).
[ -n "$version" ] || version=$(cat VERSION)
[ -n "$version" ] || die "no version in VERSION"

# The release build is linked statically with the Swift runtime: no libswift*/Foundation .so.
if readelf -d "$binary" | grep -E 'NEEDED.*(libswift|Foundation|libdispatch|libBlocksRuntime)'; then
  die "$binary needs Swift shared libraries; build it with --static-swift-stdlib (make build)"
fi

export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
maintainer=${DEB_MAINTAINER:-$(git log -1 --format='%an <%ae>' 2>/dev/null || echo 'ibeacon maintainers <ibeacon@localhost>')}
stage=$(mktemp -d "${TMPDIR:-/tmp}/ibeacon-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
pkg=$stage/debian/ibeacon
doc=$pkg/usr/share/doc/ibeacon

# Files.
install -D -m 0755 "$binary" "$pkg/usr/bin/ibeacon"
# SwiftPM links with RUNPATH $ORIGIN; /usr/bin holds no libraries, and with file capabilities
# the loader ignores it anyway.
if readelf -d "$pkg/usr/bin/ibeacon" | grep -qE '\((RPATH|RUNPATH)\)'; then
  need_host_packages chrpath
  chrpath -d "$pkg/usr/bin/ibeacon" >/dev/null
fi
for unit in ibeacon@.service ibeacon-monitor@.service; do
  install -d "$pkg/usr/lib/systemd/system"
  sed 's|@BINDIR@|/usr/bin|g' "contrib/$unit" >"$pkg/usr/lib/systemd/system/$unit"
  chmod 0644 "$pkg/usr/lib/systemd/system/$unit"
done
install -D -m 0600 contrib/ibeacon.default "$pkg/etc/default/ibeacon"
install -d -m 0755 "$pkg/etc/ibeacon"
install -D -m 0644 profiles/store12.json "$doc/examples/store12.json"
install -D -m 0644 profiles/README.md "$doc/examples/README.profiles.md"
install -D -m 0644 profiles/schema.json "$doc/examples/schema.json"
install -D -m 0644 contrib/debian/store12.monitor "$doc/examples/store12.monitor"
install -D -m 0644 README.md "$doc/README.md"
# The documents README.md links to (docs/SECURITY.md …), beside it.
docs=(docs/*.md)
[ -e "${docs[0]}" ] || die "no docs/*.md to install"
install -m 0644 "${docs[@]}" "$doc/"
install -D -m 0644 contrib/debian/copyright "$doc/copyright"
install -D -m 0644 "$manual" "$pkg/usr/share/man/man1/ibeacon.1"
install -D -m 0644 contrib/debian/lintian-overrides "$pkg/usr/share/lintian/overrides/ibeacon"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p "$stage/debian"
cat >"$stage/debian/changelog" <<CHANGELOG
ibeacon ($version) unstable; urgency=medium

  * Built from ibeacon's source at commit $commit.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
CHANGELOG
install -m 0644 "$stage/debian/changelog" "$doc/changelog"
gzip -9n "$doc/changelog" "$doc/README.md" "$pkg/usr/share/man/man1/ibeacon.1"
# Debian policy 12.3: documents in /usr/share/doc larger than 4 kB are compressed (gzip -9n).
for f in "${docs[@]}"; do
  [ "$(stat -c %s "$f")" -le 4096 ] || gzip -9n "$doc/$(basename "$f")"
done
homepage=${DEB_HOMEPAGE:-https://github.com/ibeacon/ibeacon}
sed -e "s|@MAINTAINER@|$maintainer|" -e "s|@HOMEPAGE@|$homepage|" contrib/debian/control >"$stage/debian/control"

# Depends: the libraries the binary needs, and the packages that hold them.
if [ -n "$shlibs_root" ]; then
  work=$shlibs_root/tmp/ibeacon-shlibdeps
  rm -rf "$work" && mkdir -p "$work/debian/ibeacon/usr/bin"
  cp "$stage/debian/control" "$work/debian/control"
  cp "$pkg/usr/bin/ibeacon" "$work/debian/ibeacon/usr/bin/ibeacon"
  substvars=$(in_root "$shlibs_root" sh -c "cd /tmp/ibeacon-shlibdeps && DEB_HOST_ARCH=$arch dpkg-shlibdeps -O debian/ibeacon/usr/bin/ibeacon")
  rm -rf "$work"
else
  substvars=$(cd "$stage" && dpkg-shlibdeps -O debian/ibeacon/usr/bin/ibeacon)
fi
echo "$substvars" >"$stage/debian/ibeacon.substvars"
log "$substvars"

# Maintainer scripts, conffiles, checksums, control.
install -d -m 0755 "$pkg/DEBIAN"
for script in postinst prerm postrm; do
  install -m 0755 "contrib/debian/$script" "$pkg/DEBIAN/$script"
done
echo /etc/default/ibeacon >"$pkg/DEBIAN/conffiles"
chmod 0644 "$pkg/DEBIAN/conffiles"
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
  xargs -0 md5sum | grep -v ' etc/' >DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/md5sums"
(cd "$stage" && DEB_HOST_ARCH=$arch dpkg-gencontrol -pibeacon -Pdebian/ibeacon -Tdebian/ibeacon.substvars \
  -DArchitecture="$arch" -ffiles 2>&1 | grep -v 'unknown substitution variable' >&2 || true)
[ -s "$pkg/DEBIAN/control" ] || die "dpkg-gencontrol wrote no control file"

mkdir -p "$out"
deb="$out/ibeacon_${version}_${arch}.deb"
find "$pkg" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
log "built $deb ($(du -h "$deb" | cut -f1)): $(dpkg-deb -f "$deb" Depends)"
echo "$deb"
