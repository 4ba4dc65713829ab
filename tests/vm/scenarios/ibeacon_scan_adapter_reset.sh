# shellcheck shell=bash
# Scenario ibeacon_scan_adapter_reset: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# The receiving adapter taken down and up while `ibeacon scan` runs on it: scanning stops with
# the adapter, and the tool starts it again when the adapter is back (BlueZ device events).
scenario_ibeacon_scan_adapter_reset() {
  need_bin || return
  need_profile || return
  reset_controller hci0
  reset_controller hci1
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/scanreset-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  poll 30 grep -q "advertising" "$WORK/scanreset-adv.txt" || true
  "$IBEACON_BIN" scan ${IBEACON_VM_VERBOSE:-} --device hci1 --json --reports --duration 16 > "$WORK/scanreset.jsonl" 2>"$WORK/scanreset.err" &
  local scan=$!
  BG_PIDS+=("$scan")
  # btvirt reports an advertiser once per scan enable, so a report after 5 s can only come
  # from the scan the tool started again.
  sleep 5
  timeout 10 hciconfig hci1 down; sleep 1; timeout 10 hciconfig hci1 up
  poll 30 dead "$scan" || true   # --duration 16: it ends by itself
  stop_pid "$scan" 5             # collects the exit status
  check_status "scan through hci1 down/up exits 0" 0 "$STOPPED_STATUS" "$WORK/scanreset.err"
  check_contains "scan says it starts again" "scanning resumed" "$WORK/scanreset.err"
  local late
  late=$("$PY" - "$WORK/scanreset.jsonl" "$P_MAJOR" "$P_MINOR" <<'PYEOF'
import json, sys
n = 0
for line in open(sys.argv[1]):
    try:
        o = json.loads(line)
    except ValueError:
        continue
    if o.get("major") == int(sys.argv[2]) and o.get("minor") == int(sys.argv[3]) and o.get("t", 0) >= 5:
        n += 1
print(n)
PYEOF
)
  if [ "${late:-0}" -gt 0 ]; then
    pass "beacon heard again after hci1 came back (t >= 5 s)" "$late reports"
  else
    fail "beacon heard again after hci1 came back (t >= 5 s)" "reports" "none"; cat "$WORK/scanreset.err"; cat "$WORK/scanreset.jsonl"
  fi
  stop_advertiser "$adv" "$WORK/scanreset-adv.txt"
}
