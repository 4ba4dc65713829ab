# shellcheck shell=bash
# Scenario ibeacon_advertise_scan: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_ibeacon_advertise_scan() {
  need_bin || return
  need_profile || return
  ib encode --profile "$PROFILE" --json > "$WORK/encode.json" 2>"$WORK/encode.err"
  check_status "ibeacon encode --json" 0 $? "$WORK/encode.err"
  local enc
  enc=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["advertisingData"])' "$WORK/encode.json" 2>&1)
  # Hex in any usual spelling (spaces, colons, 0x-less) compares as "02 01 06 ..."; anything
  # else is shown as it is.
  [[ $enc =~ ^[0-9A-Fa-f[:space:]:]+$ ]] && enc=$(hex <<< "$enc")
  [ -n "$enc" ] || enc="(empty) $(tr '\n' ' ' < "$WORK/encode.json")"
  check_eq "encode: advertisingData = independent encoding of the profile" "$P_ADV" "$enc"

  reset_controller hci0
  observer_start_or_fail || return
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/advertise.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  local heard=0
  if observer_wait "$P_ADV" 30; then
    heard=1
    pass "hcidump on hci1 sees the profile's 30 bytes" "$(reports_with "$P_ADV" | head -1 | cut -c1-40)…"
  else
    fail "hcidump on hci1 sees the profile's 30 bytes" "a report containing $P_ADV" "$(observer_seen); advertiser: $(tr '\n' ' ' < "$WORK/advertise.txt")"
  fi
  observer_stop
  # Scan with the tool on a freshly reset hci1: its scan-enable makes btvirt report once more.
  reset_controller hci1
  ib scan --device hci1 --json --duration 5 > "$WORK/scan.jsonl" 2>"$WORK/scan.err"
  check_status "ibeacon scan --duration 5" 0 $? "$WORK/scan.err"
  local seen
  seen=$(scan_saw_profile "$WORK/scan.jsonl")
  check_eq "scan --json reports the beacon" match "$seen"
  stop_advertiser "$adv" "$WORK/advertise.txt"
  # Stopped means stopped: a fresh scan on hci1 hears nothing from hci0 any more (meaningful
  # only if it was heard before).
  if [ "$heard" = 1 ]; then
    observer_start_or_fail || return
    sleep 3
    check_eq "no advertisement after SIGTERM (reports on a fresh scan)" 0 "$(count_reports_with "$P_ADV")"
    observer_stop
  fi
}
