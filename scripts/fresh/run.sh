#!/usr/bin/env bash
# `make test` on a machine that has nothing but what the README says (issue 29): a clean Debian 12
# root (scripts/fresh/base.sh, cached), the Swift toolchain bind-mounted read-only from
# /opt/swift, git, and the same git URL rewriting as this machine (github.com -> the offline
# Swift package mirror, when /etc/gitconfig has one). The committed HEAD of this clone is cloned
# into it twice:
#   1. as a non-root user, `make test` must stop before building anything and print the one
#      `apt-get install` command that installs every missing package (exit non-zero);
#   2. as root, `make $FRESH_TARGET` (default: test, the README's command; ~25 min) must pass,
#      installing what it needs itself.
# Each run gets a fresh overlay on the cached root, removed afterwards.
#   scripts/fresh/run.sh [--user-only] [TARGET]        (as root)
# Logs: $FRESH_CACHE/last-run.log
set -euo pipefail
# The whole script is one brace group, read before any of it runs: a run takes half an hour, and
# bash reads a plain script as it goes, so rewriting this file in place during a run (an editor,
# cp) made the rest of that run read shifted text ("unexpected EOF", after the tests passed).
{
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CACHE=${FRESH_CACHE:-/var/cache/ibeacon-fresh}
SWIFT_DIR=${FRESH_SWIFT:-/opt/swift}
user_only=0
[ "${1:-}" = --user-only ] && { user_only=1; shift; }
target=${1:-${FRESH_TARGET:-test}}
[ "$(id -u)" = 0 ] || { echo "fresh: needs root (chroot, mounts)" >&2; exit 1; }
[ -x "$SWIFT_DIR/usr/bin/swift" ] || { echo "fresh: no Swift toolchain at $SWIFT_DIR" >&2; exit 1; }
"$here/base.sh"

# A run that was killed (SIGKILL, a session's end) could not run its cleanup: its overlay, /proc,
# /sys and the rbind of /dev stay mounted under $CACHE/run.*. Unmount and remove those, but never
# one that is still in use: its run.sh alive (the pid file) or a process chrooted into it.
in_use() {
  local dir=$1 pid p
  pid=$(cat "$dir/pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && return 0
  for p in /proc/[0-9]*; do
    case "$(readlink "$p/root" 2>/dev/null)" in "$dir"/*) return 0 ;; esac
  done
  return 1
}
for old in "$CACHE"/run.*; do
  [ -d "$old" ] || continue
  if in_use "$old"; then echo "fresh: $old is another run's, in use: left alone"; continue; fi
  echo "fresh: removing $old, left by a run that was killed before its cleanup"
  umount -R -l "$old/root" 2>/dev/null || true
  if findmnt -rn -o TARGET | grep -q "^$old/"; then
    echo "fresh: something under $old is still mounted: left alone (see findmnt)"
    continue
  fi
  rm -rf "$old"
done

run=$(mktemp -d "$CACHE/run.XXXXXX")
echo $$ >"$run/pid"
root=$run/root
mkdir -p "$run/upper" "$run/work" "$root"
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done
  rm -rf "$run"
}
trap cleanup EXIT
mnt() { mount "$@"; mounts+=("${@: -1}"); }
mnt -t overlay overlay -o "lowerdir=$CACHE/base,upperdir=$run/upper,workdir=$run/work" "$root"
mnt -t proc proc "$root/proc"
mnt -t sysfs sys "$root/sys"
mnt --rbind /dev "$root/dev"
mnt -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mnt --bind "$SWIFT_DIR" "$root/opt/swift"
mount -o remount,bind,ro "$root/opt/swift"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# What the Debian installer writes and debootstrap does not: without it `localhost` does not
# resolve (the unit suite's TCP transport test connects to tcp:localhost:PORT).
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"

# This machine's TLS trust for pip (a network that inspects TLS has its own CA here), kept apart
# from the root's own bundle, which its apt may rewrite; and nothing else of pip's settings.
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/host-ca.crt"
  printf '[global]\ncert = /etc/ssl/host-ca.crt\n' >"$root/etc/pip.conf"
fi

# This machine's git URL rewriting (Swift packages offline), and nothing else of its git config.
: >"$root/etc/gitconfig"
if git config --system --get-regexp '^url\..*\.insteadof$' >/dev/null 2>&1; then
  while read -r key value; do
    base=${key#url.}; base=${base%.insteadof}
    if [ -d "$base" ]; then
      mkdir -p "$root$base"
      mnt --bind "$base" "$root$base"
      mount -o remount,bind,ro "$root$base"
    fi
    git config --file "$root/etc/gitconfig" --add "url.$base.insteadOf" "$value"
  done < <(git config --system --get-regexp '^url\..*\.insteadof$')
  git config --file "$root/etc/gitconfig" --add safe.directory '*'  # the mirror is root's
fi

in_root() {  # in_root USER COMMAND: a login-like environment, the toolchain on PATH
  local user=$1; shift
  local home=/root; [ "$user" = root ] || home=/home/$user
  chroot "$root" /usr/sbin/runuser -u "$user" -- env -i HOME="$home" USER="$user" LANG=C.UTF-8 TERM=dumb \
    PATH=/opt/swift/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd ~ && $*"
}

rev=$(git -C "$repo" rev-parse HEAD)
echo "fresh: cloning $rev (the committed HEAD; uncommitted changes are not tested)"
git clone -q --no-hardlinks "$repo" "$root/home/fresh/ibeacon"
git -C "$root/home/fresh/ibeacon" checkout -q "$rev"
chroot "$root" chown -R fresh:fresh /home/fresh/ibeacon
git clone -q --no-hardlinks "$repo" "$root/root/ibeacon"
git -C "$root/root/ibeacon" checkout -q "$rev"
# The shared captures ($IBEACON_CAPTURES, else ../shared/captures) beside each clone, where the
# clone's own default finds them (../shared/captures), read-only.
captures=${IBEACON_CAPTURES:-$repo/../shared/captures}
if [ -d "$captures" ]; then
  for home in "$root/root" "$root/home/fresh"; do
    mkdir -p "$home/shared/captures"
    mnt --bind "$(cd "$captures" && pwd)" "$home/shared/captures"
    mount -o remount,bind,ro "$home/shared/captures"
  done
fi

echo "fresh: 1. as a non-root user: make test"
set +e
out=$(in_root fresh "cd ibeacon && make test 2>&1"); rc=$?
set -e
printf '%s\n' "$out" | sed 's/^/  | /'
want=""  # the packages this root lacks (pkg-config and openssl come with the toolchain's)
for p in $(make -s -C "$repo" --no-print-directory print-test-packages); do
  chroot "$root" dpkg -s "$p" >/dev/null 2>&1 || want="$want $p"
done
line=$(printf '%s\n' "$out" | grep '^run: sudo apt-get install -y' || true)
fail=0
[ "$rc" != 0 ] || { echo "fresh: FAIL: make test as a user exited 0"; fail=1; }
for p in $want; do
  printf '%s\n' "$line" | grep -qw -- "$p" || { echo "fresh: FAIL: the apt-get command lacks $p"; fail=1; }
done
[ ! -e "$root/home/fresh/ibeacon/.build" ] || { echo "fresh: FAIL: something was built before the message"; fail=1; }
[ ! -e "$root/home/fresh/ibeacon/.venv" ] || { echo "fresh: FAIL: the virtualenv was made before the message"; fail=1; }
[ "$fail" = 0 ] || exit 1
echo "fresh: ok: exit $rc, one command for all $(echo $want | wc -w) missing packages, nothing built"
[ "$user_only" = 1 ] && exit 0

echo "fresh: 2. as root: make $target (the log: $CACHE/last-run.log)"
start=$SECONDS
set +e
in_root root "cd ibeacon && make $target" >"$CACHE/last-run.log" 2>&1; rc=$?
set -e
tail -n 15 "$CACHE/last-run.log" | sed 's/^/  | /'
[ "$rc" = 0 ] || { echo "fresh: FAIL: make $target as root exited $rc after $((SECONDS - start)) s"; exit 1; }
echo "fresh: ok: make $target passed as root on a clean Debian 12 in $((SECONDS - start)) s"
exit 0
}
