# shellcheck shell=bash
# Scenario kernel_coexist: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# 1. Another program's advertisement (btmgmt add-adv, as bluetoothd's clients get) and ibeacon's
#    are both heard on hci1 while ibeacon advertises; the other one is still there after ibeacon
#    exits on SIGTERM, and ibeacon never used the other's instance number.
scenario_kernel_coexist() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  pass "bluetoothd running, hci0 and hci1 powered"
  ib devices > "$WORK/coexist-devices.txt" 2>&1
  check_eq "ibeacon devices: hci0 goes through the kernel" "hci0 mgmt" "$(awk '$1 == "hci0" { print $1, $NF }' "$WORK/coexist-devices.txt")"
  btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 1 > "$WORK/addadv.txt" 2>&1
  check_eq "btmgmt add-adv instance 1 (another program): 1 instance" "1" "$(mgmt_instances 0)"
  local t0=$EPOCHREALTIME
  "$IBEACON_BIN" advertise ${IBEACON_VM_VERBOSE:-} --device hci0 --profile "$PROFILE" > "$WORK/coexist-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if poll 30 grep -q "through the kernel" "$WORK/coexist-adv.txt"; then
    pass "advertise on hci0 goes through the kernel" "$(head -1 "$WORK/coexist-adv.txt" | cut -c1-110); ready after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f ms", (b - a) * 1000 }')"
  else
    fail "advertise on hci0 goes through the kernel" "a status line" "$(tr '\n' ' ' < "$WORK/coexist-adv.txt")"
  fi
  check_eq "kernel instances: the other's and ibeacon's" "2" "$(mgmt_instances 0)"
  check_contains "ibeacon took a free instance number (2), not the other's" "(instance 2)" "$WORK/coexist-adv.txt"
  kernel_observe 6
  local ours others
  ours=$(count_reports_with "$P_ADV"); others=$(count_reports_with "$OTHER_ADV")
  if [ "$ours" -gt 0 ] && [ "$others" -gt 0 ]; then
    pass "both advertisements heard on hci1" "iBeacon $ours, other $others reports"
  else
    fail "both advertisements heard on hci1" "both" "iBeacon $ours, other $others reports: $(observer_seen)"
  fi
  stop_advertiser "$adv" "$WORK/coexist-adv.txt"
  check_eq "after ibeacon exits: only the other's instance" "1" "$(mgmt_instances 0)"
  kernel_observe 4
  ours=$(count_reports_with "$P_ADV"); others=$(count_reports_with "$OTHER_ADV")
  if [ "$others" -gt 0 ] && [ "$ours" -eq 0 ]; then
    pass "after exit: the other advertisement still heard, the iBeacon no longer" "other $others reports"
  else
    fail "after exit: the other advertisement still heard, the iBeacon no longer" "other > 0, iBeacon 0" "iBeacon $ours, other $others"
  fi
  btmgmt_tty --index 0 rm-adv 1 > /dev/null 2>&1
  coexist_bluetoothctl
  bluetoothd_stop
}
