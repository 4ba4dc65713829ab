#!/bin/bash
# The 6.1 guest kernel's `list_del corruption` in hci_chan_del (bluetoothd SIGSEGV) when an LE
# link bluetoothd holds an ATT socket on goes down: does it need the Bumble controller, this
# kernel, or the central guard's timing? Run in the VM, with BlueZ's own emulator (btvirt):
#
#   make vm-run [VM_KERNEL=5.10|6.12] VM_CMD='tests/vm/experiments/central_oops.sh MODE ROUNDS'
#
# hci1 is the central: `l2test -n` opens an LE ATT channel to hci0 (bluetoothd on hci0 holds
# the peripheral side's ATT socket, as for a phone). MODE says who drops the link and when:
#   guard         ibeacon advertise (connectable profile) on hci0: the central guard disconnects
#   now           btmgmt add-adv -c on hci0, `btmgmt disconnect` as soon as the link is listed
#   late          the same, disconnect 3 s after the link came up (its setup done)
#   dbus          the same as late, through bluetoothd: Device1.Disconnect over D-Bus
#   central       the central (hci1) closes its socket, nobody disconnects from hci0
# Prints one line per round and a summary: links made, oopses (dmesg), bluetoothd alive.
set -u
mode=${1:-guard}
rounds=${2:-5}
bin=${IBEACON_BIN:-.build/release/ibeacon}
W=$(mktemp -d)
btmgmt_tty() { timeout 20 script -qc "btmgmt $*" /dev/null | tr -d '\r'; }
poll() { local t=$1; shift; local end=$((SECONDS + t)); until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done; }
linked() { hcitool -i hci0 con | grep -q 'LE 00:AA:01:01:00:01'; }
unlinked() { ! linked; }
powered() { btmgmt_tty --index "$1" info | grep -q 'current settings:.*powered'; }

listed() { btmgmt_tty --index "$1" info | grep -q "^hci$1:"; }
modprobe hci_vhci
# As the controllers scenario: a first HCI Reset answered too late keeps an adapter out of the
# management index list; start btvirt again then.
for try in 1 2 3; do
  btvirt -l2 > "$W/btvirt.log" 2>&1 &
  bv=$!
  poll 20 listed 0 && poll 5 listed 1 && break
  echo "experiment: btvirt try $try: not both listed"
  kill -TERM "$bv"; wait "$bv" 2>/dev/null; sleep 2
done
mkdir -p /run/dbus; [ -S /run/dbus/system_bus_socket ] || dbus-daemon --system --fork
/usr/libexec/bluetooth/bluetoothd -n > "$W/bluetoothd.log" 2>&1 &
bt=$!
poll 20 powered 0 && poll 20 powered 1 || echo "experiment: hci0/hci1 not powered: $(btmgmt_tty info | head -5 | tr '\n' ' ')"
dmesg -c > /dev/null
adv=
case $mode in
  guard)
    "$bin" advertise -v --device hci0 --profile profiles/store12.json > "$W/adv.txt" 2>&1 &
    adv=$!
    poll 30 grep -q 'through the kernel' "$W/adv.txt" || echo "experiment: advertiser: $(tr '\n' ' ' < "$W/adv.txt")";;
  *) btmgmt_tty --index 0 add-adv -c -d 0201060303aafe 1 > /dev/null;;
esac
made=0
for r in $(seq 1 "$rounds"); do
  l2test -n -i hci1 -V le_public -J 4 00:AA:01:00:00:00 > "$W/l2test.$r" 2>&1 &
  l2=$!
  if poll 15 linked; then
    made=$((made + 1))
    case $mode in
      now) btmgmt_tty --index 0 disconnect -t le_public 00:AA:01:01:00:01 > /dev/null;;
      late) sleep 3; btmgmt_tty --index 0 disconnect -t le_public 00:AA:01:01:00:01 > /dev/null;;
      dbus) sleep 3; dbus-send --system --print-reply --dest=org.bluez /org/bluez/hci0/dev_00_AA_01_01_00_01 \
              org.bluez.Device1.Disconnect > "$W/dbus.$r" 2>&1 || echo "experiment: dbus: $(tr '\n' ' ' < "$W/dbus.$r")";;
      central) sleep 3; kill -TERM "$l2";;
    esac
    poll 15 unlinked || echo "experiment: round $r: link still up"
  fi
  kill -TERM "$l2" 2>/dev/null; wait "$l2" 2>/dev/null
  oops=$(dmesg | grep -c 'list_del corruption\|general protection\|BUG:\|Oops')
  alive=no; kill -0 "$bt" 2>/dev/null && alive=yes
  echo "experiment: $mode round $r: linked=$made oops_lines=$oops bluetoothd_alive=$alive"
  [ "$alive" = yes ] || break
  sleep 1
done
[ -n "$adv" ] && { kill -TERM "$adv"; wait "$adv"; grep -c 'a central (00:AA:01:01:00:01)' "$W/adv.txt" | sed 's/^/experiment: guard log lines: /'; }
echo "experiment: SUMMARY kernel=$(uname -r) controller=btvirt mode=$mode rounds=$rounds links=$made oops=$(dmesg | grep -c 'list_del corruption') segfault=$(dmesg | grep -c 'bluetoothd.*segfault') bluetoothd_alive=$(kill -0 "$bt" 2>/dev/null && echo yes || echo no)"
dmesg | grep -A3 'list_del corruption\|segfault' | head -12 | sed 's/^/experiment: dmesg: /'
grep -i 'error\|crash' "$W/bluetoothd.log" | head -3 | sed 's/^/experiment: bluetoothd: /'
kill -TERM "$bt" 2>/dev/null
exit 0
