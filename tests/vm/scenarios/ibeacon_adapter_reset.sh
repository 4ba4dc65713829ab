# shellcheck shell=bash
# Scenario ibeacon_adapter_reset: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Raw HCI (--device raw:hci0): ibeacon re-applies the advertising itself after a down/up;
# kernel_recovery covers the default path, where the kernel reports the power cycle.
scenario_ibeacon_adapter_reset() {
  need_bin || return
  need_profile || return
  reset_controller hci0
  observer_start_or_fail || return
  "$IBEACON_BIN" advertise ${IBEACON_VM_VERBOSE:-} --device raw:hci0 --profile "$PROFILE" > "$WORK/reset-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if observer_wait "$P_ADV" 30; then
    pass "advertising seen before the reset"
  else
    fail "advertising seen before the reset" "a report containing $P_ADV" "$(observer_seen)"
  fi
  observer_stop
  timeout 10 hciconfig hci0 down; sleep 1; timeout 10 hciconfig hci0 up
  local t0=$SECONDS
  # Observe with ibeacon's own (extended) scanner on a freshly reset hci1, as the kernel scans:
  # btvirt's legacy-scan view of a controller reset under extended advertising shows a stale
  # empty ADV_IND instead (see raw_advertising_after_down_up for the legacy-only case).
  sleep 3
  reset_controller hci1
  ib scan --device hci1 --json --duration 6 > "$WORK/reset-scan.jsonl" 2>"$WORK/reset-scan.err"
  local seen
  seen=$(scan_saw_profile "$WORK/reset-scan.jsonl")
  if [ "$seen" = match ]; then
    pass "advertising seen again after hciconfig hci0 down/up" "within $((SECONDS - t0)) s"
  else
    fail "advertising seen again after hciconfig hci0 down/up" "the profile's beacon in ibeacon scan --json" "$seen"
    echo "        advertiser log:"; sed 's/^/          /' "$WORK/reset-adv.txt"
  fi
  check_contains "advertiser logged the recovery" "advertising resumed" "$WORK/reset-adv.txt"
  stop_advertiser "$adv" "$WORK/reset-adv.txt"
}
