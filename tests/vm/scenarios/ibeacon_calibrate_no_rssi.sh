# shellcheck shell=bash
# Scenario ibeacon_calibrate_no_rssi: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_ibeacon_calibrate_no_rssi() {
  need_bin || return
  need_profile || return
  local copy=$WORK/calibrate.json
  cp "$PROFILE" "$copy" && cp "$PROFILE" "$copy.orig"
  reset_controller hci0
  reset_controller hci1
  # The beacon is `ibeacon advertise` on hci0: btvirt delivers advertising to scanners of the same
  # command set only, and the calibrating scanner on hci1 uses extended scanning, as the kernel does.
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/calibrate-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  sleep 2
  ib calibrate --device hci1 --profile "$copy" --duration 10 > "$WORK/calibrate.txt" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ]; then pass "calibrate fails without RSSI" "exit $rc"; else fail "calibrate fails without RSSI" "non-zero exit" "exit 0"; fi
  check_contains "calibrate says why" "RSSI not available" "$WORK/calibrate.txt"
  if cmp -s "$copy" "$copy.orig"; then
    pass "profile unchanged" "cmp equal"
  else
    fail "profile unchanged" "$(tr '\n' ' ' < "$copy.orig")" "$(tr '\n' ' ' < "$copy")"
  fi
  stop_advertiser "$adv" "$WORK/calibrate-adv.txt"
}
