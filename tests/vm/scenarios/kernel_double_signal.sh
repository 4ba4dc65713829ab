# shellcheck shell=bash
# Scenario kernel_double_signal: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Issue 29: one stop request, however many copies of its signal. The advertiser in a process
# group of its own (setsid) next to bluetoothd gets SIGTERM twice, as `timeout` (the child, then
# its group) or a shell trap passing a group kill on deliver it: exit 0, no "again", and the
# kernel's advertising instance removed. (The guardian, in a process group of its own, is not
# signalled; it would remove the instance after a forced exit too, so the exit status and the
# log are what tell the cleanup finished.) Then the same under `timeout` itself.
scenario_kernel_double_signal() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  local log=$WORK/double-adv.txt
  setsid "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$log" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if poll 30 grep -q "through the kernel" "$log"; then pass "advertise (own process group) goes through the kernel"
  else fail "advertise (own process group) goes through the kernel" "a status line" "$(tr '\n' ' ' < "$log")"; fi
  check_eq "its process group is its own" "$adv" "$(ps -o pgid= -p "$adv" | tr -d ' ')"
  check_eq "kernel instances while advertising" "1" "$(mgmt_instances 0)"
  kill -TERM -- "-$adv"; kill -TERM -- "-$adv"
  poll 10 dead "$adv" || kill -KILL "$adv"; wait "$adv" 2>/dev/null
  check_status "SIGTERM twice to its process group: exit 0" 0 $? "$log"
  bg_forget "$adv"
  if grep -q "again" "$log"; then fail "the cleanup was not abandoned" "no 'again'" "$(tr '\n' ' ' < "$log")"
  else pass "the cleanup was not abandoned"; fi
  check_eq "no kernel instance left" "0" "$(mgmt_instances 0)"

  log=$WORK/double-timeout.txt
  setsid timeout --preserve-status -s TERM 120 "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$log" 2>&1 &
  local t=$!
  BG_PIDS+=("$t")
  if poll 30 grep -q "through the kernel" "$log"; then pass "advertise under timeout goes through the kernel"
  else fail "advertise under timeout goes through the kernel" "a status line" "$(tr '\n' ' ' < "$log")"; fi
  check_eq "kernel instances under timeout" "1" "$(mgmt_instances 0)"
  kill -TERM "$t"   # timeout passes it to ibeacon, then to its whole group
  poll 10 dead "$t" || kill -KILL "$t"; wait "$t" 2>/dev/null
  check_status "SIGTERM to timeout (ibeacon gets it twice): exit 0" 0 $? "$log"
  bg_forget "$t"
  if grep -q "again" "$log"; then fail "the cleanup under timeout was not abandoned" "no 'again'" "$(tr '\n' ' ' < "$log")"
  else pass "the cleanup under timeout was not abandoned"; fi
  check_eq "no kernel instance left after timeout" "0" "$(mgmt_instances 0)"
  bluetoothd_stop
}

# The same with bluetoothctl's `advertise on` as the other program (D-Bus LEAdvertisingManager1:
# bluetoothd adds the kernel instance, and removes it when bluetoothctl goes). bluetoothctl reads
# its commands from a terminal: script(1) gives it one, fed from a FIFO kept open on fd 7.
BTCTL_ADV="FF FF CA FE 03 04"   # manufacturer data 0xFFFF: CA FE 03 04
coexist_bluetoothctl() {
  local fifo=$WORK/btctl.in
  rm -f "$fifo"; mkfifo "$fifo"
  script -qfc "bluetoothctl" /dev/null < "$fifo" > "$WORK/btctl.out" 2>&1 &
  local btctl=$!
  BG_PIDS+=("$btctl")
  exec 7> "$fifo"
  sleep 1
  # btvirt's hci0 is 00:AA:01:00:00:00 (bluetoothctl's default is the first adapter it met).
  printf 'select 00:AA:01:00:00:00\nmenu advertise\nmanufacturer 0xffff 0xca 0xfe 0x03 0x04\nback\nadvertise on\n' >&7
  if poll 20 grep -q "Advertising object registered" "$WORK/btctl.out"; then
    pass "bluetoothctl advertise on (another program, through bluetoothd)" "$(mgmt_instances 0) instance(s)"
  else
    fail "bluetoothctl advertise on (another program, through bluetoothd)" "Advertising object registered" "$(tr -d '\r' < "$WORK/btctl.out" | tail -5 | tr '\n' ' ')"
  fi
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/coexist-btctl-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  poll 30 grep -q "through the kernel" "$WORK/coexist-btctl-adv.txt"
  check_eq "kernel instances: bluetoothctl's and ibeacon's" "2" "$(mgmt_instances 0)"
  kernel_observe 6
  local ours others
  ours=$(count_reports_with "$P_ADV"); others=$(count_reports_with "$BTCTL_ADV")
  if [ "$ours" -gt 0 ] && [ "$others" -gt 0 ]; then
    pass "iBeacon and bluetoothctl's advertisement both heard on hci1" "iBeacon $ours, bluetoothctl $others reports"
  else
    fail "iBeacon and bluetoothctl's advertisement both heard on hci1" "both" "iBeacon $ours, bluetoothctl $others reports: $(observer_seen)"
  fi
  stop_advertiser "$adv" "$WORK/coexist-btctl-adv.txt"
  check_eq "after ibeacon exits: bluetoothctl's instance only" "1" "$(mgmt_instances 0)"
  kernel_observe 4
  ours=$(count_reports_with "$P_ADV"); others=$(count_reports_with "$BTCTL_ADV")
  if [ "$others" -gt 0 ] && [ "$ours" -eq 0 ]; then
    pass "after exit: bluetoothctl's advertisement still heard, the iBeacon no longer" "bluetoothctl $others reports"
  else
    fail "after exit: bluetoothctl's advertisement still heard, the iBeacon no longer" "bluetoothctl > 0, iBeacon 0" "iBeacon $ours, bluetoothctl $others"
  fi
  printf 'advertise off\nquit\n' >&7
  exec 7>&-
  poll 10 dead "$btctl" || kill "$btctl" 2>/dev/null
  wait "$btctl" 2>/dev/null; bg_forget "$btctl"
}

# 4. scan and calibrate on an adapter bluetoothd manages go through the kernel (an advertisement
#    monitor) while another program runs discovery on the same adapter (btmgmt find -l, as
#    bluetoothctl scan on): both get reports, neither is stopped, and ibeacon removes its monitor.
#    The receiver is a Bumble controller behind /dev/vhci (btvirt reports once per scan enable and
#    RSSI 127): the beacon advertises every 100 ms, so reports/s is the kernel path's rate.
# The kernel's advertisement-monitor scan window (Default System Configuration 0x0014) as
# btmgmt prints it: little-endian hex, 3000 = 48 slots = 30 ms.
monitor_window() {
  btmgmt_tty --index "$1" read-sysconfig | awk '/Type: 0x0014/ { print $NF }'
}
kernel_scan_rate() {  # kernel_scan_rate FILE SECS → reports/s of the profile's beacon
  "$PY" - "$1" "$P_MAJOR" "$P_MINOR" "$2" <<'PYEOF'
import json, sys
n = 0
for line in open(sys.argv[1]):
    try:
        o = json.loads(line)
    except ValueError:
        continue
    if o.get("major") == int(sys.argv[2]) and o.get("minor") == int(sys.argv[3]):
        n += 1
print("%.1f" % (n / float(sys.argv[4])))
PYEOF
}
