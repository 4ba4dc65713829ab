#!/bin/bash
# Fetches and prepares, in $DEB_CACHE, everything `make deb` and `make deb-test` need for each
# ARCH, so those later only build and test: the clean roots of the test suites (amd64: Debian
# 12 and 13; arm64: Debian 13), and for arm64 the cross toolchain and sysroot (scripts/deb/cross.sh).
# With a full cache it does nothing (a few seconds). Three lanes run at once, as they wait on
# different things: the toolchain (Debian unstable's swiftlang, 700 MB of downloads), the arm64
# root (dpkg under qemu-user: CPU), the amd64 roots. .ci/run starts it in the background.
#
#   scripts/deb/prepare.sh amd64 arm64
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/deb/lib.sh

t0=$SECONDS
mkdir -p "$DEB_CACHE"
lanes=() pids=()
lane() {  # lane NAME COMMAND...: in the background, output in $DEB_CACHE/prepare-NAME.log
  local name=$1
  shift
  ("$@") >"$DEB_CACHE/prepare-$name.log" 2>&1 &
  lanes+=("$name")
  pids+=($!)
}
roots() {  # roots ARCH SUITE...
  local arch=$1 suite
  shift
  for suite in "$@"; do rootfs_tarball "$suite" "$arch" >/dev/null; done
}
for arch in "$@"; do
  case $arch in
  amd64) lane amd64-roots roots amd64 trixie bookworm ;;
  arm64)
    lane arm64-toolchain scripts/deb/cross.sh arm64 --prepare
    lane arm64-root roots arm64 trixie
    ;;
  *) die "nothing to prepare for $arch" ;;
  esac
done
failed=0
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    log "prepared ${lanes[$i]}"
  else
    failed=1
    log "preparing ${lanes[$i]} failed:"
    tail -20 "$DEB_CACHE/prepare-${lanes[$i]}.log" >&2
  fi
done
log "prepare $*: $((SECONDS - t0)) s"
exit $failed
