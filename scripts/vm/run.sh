#!/bin/bash
# Run a command as root inside a throw-away QEMU VM that has the real Linux Bluetooth stack.
#
#   scripts/vm/run.sh [options] -- COMMAND [ARG...]
#
# The guest boots Debian's generic kernel (prepared and cached by prepare.sh under .vm/), sees
# the host's / read-only over 9p with a tmpfs overlay on top (writes vanish at power-off; /tmp
# included, so a repository under the host's /tmp is visible), runs COMMAND in the repository directory (or -C DIR), streams
# the serial console to stdout, powers off, and exits with COMMAND's exit status.
#
# Options:
#   --timeout SECS   kill the VM after SECS seconds (default $VM_TIMEOUT or 300) → exit 124
#   --memory MB      guest memory (default $VM_MEMORY or 512)
#   --cpus N         guest CPUs (default $VM_CPUS or 2)
#   -C DIR           working directory in the guest (default: the repository root); must be
#                    visible through the host root (not under /run, /dev, /proc, /sys)
#   --env NAME=VALUE set a variable for COMMAND (repeatable). The guest environment is clean
#                    (HOME=/root, Debian's PATH without pyenv/user dirs); IBEACON_* and CI are
#                    passed through from the caller automatically.
#
# Exit status: COMMAND's status; 124 on timeout; 125 when the VM failed to start or the guest
# stopped without reporting a status; 64 on usage errors.
#
# KVM is not usable on the build hosts (they are VMs themselves), so this is pure TCG.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
VM_DIR=${VM_DIR:-$repo/.vm}

timeout=${VM_TIMEOUT:-300}
memory=${VM_MEMORY:-512}
cpus=${VM_CPUS:-2}
chdir=$repo
envs=()

say() { echo "vm: $*" >&2; }
usage() {
  echo "usage: $0 [--timeout SECS] [--memory MB] [--cpus N] [-C DIR] [--env NAME=VALUE]... -- COMMAND [ARG...]" >&2
  exit 64
}

while [ $# -gt 0 ]; do
  case $1 in
    --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2;;
    --timeout=*) timeout=${1#*=}; shift;;
    --memory) [ $# -ge 2 ] || usage; memory=$2; shift 2;;
    --cpus) [ $# -ge 2 ] || usage; cpus=$2; shift 2;;
    -C) [ $# -ge 2 ] || usage; chdir=$2; shift 2;;
    --env) [ $# -ge 2 ] || usage; envs+=("$2"); shift 2;;
    --) shift; break;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0;;
    *) echo "vm: unknown option '$1'" >&2; usage;;
  esac
done
[ $# -gt 0 ] || usage
[[ $timeout =~ ^[1-9][0-9]*$ ]] || { echo "vm: --timeout wants whole seconds, got '$timeout'" >&2; exit 64; }
for e in "${envs[@]}"; do
  [[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || { echo "vm: --env wants NAME=VALUE, got '$e'" >&2; exit 64; }
done
chdir=$(cd "$chdir" && pwd) || exit 64
case $chdir/ in
  /run/*|/dev/*|/proc/*|/sys/*) echo "vm: -C $chdir is not visible in the guest (it has its own $chdir)" >&2; exit 64;;
esac
case $VM_DIR/ in
  /run/*) echo "vm: VM_DIR=$VM_DIR must not be under /run (the guest mounts its own)" >&2; exit 64;;
esac

# VM_SKIP_PREPARE=1: the caller (mk/vm.mk) has just run prepare.sh.
# VM_KERNEL (5.10, 6.12; empty: this host's Debian release): which prepared kernel boots.
envfile=kernel${VM_KERNEL:+-$VM_KERNEL}.env
if [ "${VM_SKIP_PREPARE:-0}" != 1 ] || [ ! -s "$VM_DIR/$envfile" ]; then
  "$here/prepare.sh" || { say "preparing the kernel failed"; exit 125; }
fi
# shellcheck disable=SC1090
. "$VM_DIR/$envfile"
VM_DIR=$(cd "$VM_DIR" && pwd)

qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || { say "qemu-system-x86_64 not found (scripts/vm/deps.sh installs it)"; exit 125; }

xdir=$(mktemp -d "${TMPDIR:-/tmp}/ibeacon-vm.XXXXXX")
qpid=
spid=
cleanup() {
  if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
    kill -TERM "$qpid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$qpid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$qpid" 2>/dev/null || true
    wait "$qpid" 2>/dev/null || true
  fi
  if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then
    kill -TERM "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
  fi
  rm -rf "$xdir"
}
trap cleanup EXIT
trap 'say "interrupted; stopping the VM"; exit 130' INT
trap 'say "terminated; stopping the VM"; exit 143' TERM

# What the guest's PID 1 reads (see guest-init.sh).
printf 'VM_MODDIR=%q\n' "$VM_DIR/$MODDIR" > "$xdir/vm.env"
{
  echo '#!/bin/bash'
  printf 'cd -- %q || exit 125\n' "$chdir"
  printf 'exec env -i HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8'
  printf ' PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  while IFS= read -r name; do
    printf ' %q' "$name=${!name}"
  done < <(compgen -e | grep -E '^(IBEACON_[A-Za-z0-9_]*|CI)$' || true)
  for e in "${envs[@]}"; do printf ' %q' "$e"; done
  printf ' %q' "$@"
  echo
} > "$xdir/cmd.sh"

# 8250.nr_uarts=1: one serial port, less probing. no_timer_check: on a loaded host TCG is too slow
# for the IO-APIC timer check, which then panics ("IO-APIC + timer doesn't work"). panic=-1: reboot (= qemu exits, -no-reboot)
# at once on a panic instead of hanging until the timeout.
append="console=ttyS0 8250.nr_uarts=1 no_timer_check quiet loglevel=4 panic=-1 mitigations=off rdinit=/init"

mkfifo "$xdir/console"
# The serial line ends lines with CR LF; strip the CR for readable CI logs. sed -u: unbuffered.
sed -u -e 's/\r$//' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' < "$xdir/console" &
spid=$!

say "booting $KPKG ($KERNEL), ${memory} MB, $cpus CPU(s), timeout ${timeout} s: $*"
start=$SECONDS
"$qemu" -nodefaults -nographic -no-reboot \
  -accel tcg,thread=multi,tb-size=64 -cpu max -m "$memory" -smp "$cpus" \
  -kernel "$VM_DIR/$KERNEL" -initrd "$VM_DIR/$INITRD" -append "$append" \
  -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" \
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
  -fsdev "local,id=xchg,path=$xdir,security_model=none" \
  -device virtio-9p-pci,fsdev=xchg,mount_tag=xchg \
  -serial stdio -monitor none \
  </dev/null >"$xdir/console" &
qpid=$!

timed_out=0
while kill -0 "$qpid" 2>/dev/null; do
  if [ $((SECONDS - start)) -ge "$timeout" ]; then
    timed_out=1
    break
  fi
  sleep 0.25
done
if [ "$timed_out" = 1 ]; then
  kill -TERM "$qpid" 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$qpid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$qpid" 2>/dev/null || true
fi
qrc=0
wait "$qpid" || qrc=$?
qpid=
wait "$spid" || true
spid=
elapsed=$((SECONDS - start))

if [ "$timed_out" = 1 ]; then
  say "TIMEOUT: the VM ran longer than ${timeout} s and was killed: $*"
  exit 124
fi
if [ -s "$xdir/status" ]; then
  status=$(cat "$xdir/status")
  if [[ $status =~ ^[0-9]+$ ]]; then
    say "command exited with status $status after ${elapsed} s (boot + run + power-off)"
    exit "$status"
  fi
fi
say "the guest stopped without reporting an exit status (qemu exit code $qrc, ${elapsed} s); see the console output above"
exit 125
