# shellcheck shell=bash
# Scenario ibeacon_monitor_power: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# The receiving adapter powered off (btmgmt power off, through the kernel's management path)
# for longer than --exit-after while the beacon stays on the air: the region is unknown with
# the reason, never exited; powered on again it is inside as a state, never entered (issue 24).
scenario_ibeacon_monitor_power() {
  need_bin || return
  need_profile || return
  reset_controller hci0
  reset_controller hci1
  # bluetoothd sets both adapters up in the kernel (powered, LE on): hci1 is then scanned
  # through the management interface (an advertisement monitor), where power shows as New Settings.
  need_bluetoothd || return
  local exit_after=8
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/power-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  "$IBEACON_BIN" monitor -v --device hci1 --profile "$PROFILE" --exit-after $exit_after --json \
    > "$WORK/power.jsonl" 2>"$WORK/power.err" &
  local mon=$!
  BG_PIDS+=("$mon")
  if ! poll 30 grep -q '"event":"inside"' "$WORK/power.jsonl"; then
    fail "inside while the beacon advertises" "an inside event" "$(tr '\n' ' ' < "$WORK/power.jsonl"); $(tr '\n' ' ' < "$WORK/power.err")"
    stop_pid "$mon" 10
    stop_pid "$adv" 10
    bluetoothd_stop
    return
  fi
  check_contains "monitor goes through the kernel (advertisement monitor)" "advertisement monitor" "$WORK/power.err"
  pass "inside while the beacon advertises (a state: the first determination)" "$(head -1 "$WORK/power.jsonl" | cut -c1-60)"
  local off_at
  off_at=$(date +%s.%N)
  btmgmt_tty --index 1 power off > "$WORK/power-off.txt" 2>&1
  sleep $((exit_after * 3))
  btmgmt_tty --index 1 power on > "$WORK/power-on.txt" 2>&1
  poll 30 sh -c "[ \$(grep -c '\"event\":\"inside\"' '$WORK/power.jsonl') -ge 2 ]"
  sleep 1
  stop_pid "$mon" 10
  check_status "monitor ends on SIGTERM with 0" 0 "$STOPPED_STATUS" "$WORK/power.err"
  stop_pid "$adv" 10
  bluetoothd_stop
  local verdict
  verdict=$("$PY" - "$WORK/power.jsonl" "$off_at" <<'PYEOF'
import datetime, json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kinds = [e["event"] for e in events if e["event"] != "state"]
def when(e):
    return datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp() - float(sys.argv[2])
problems = []
if kinds != ["inside", "unknown", "inside"]:
    problems.append("events %s, expected inside, unknown, inside (seconds from power off: %s)"
                    % (kinds, ["%s %.1f" % (e["event"], when(e)) for e in events]))
unknown = [e for e in events if e["event"] == "unknown"]
if unknown and (unknown[0].get("cause") != "powered-off" or "hci1 was powered off" not in unknown[0].get("reason", "")):
    problems.append("unknown %s" % unknown[0])
print("; ".join(problems) if problems else "ok: " + ", ".join(kinds))
PYEOF
)
  check_eq "monitor: inside, unknown while hci1 was powered off (${exit_after}s exit-after, off $((exit_after * 3)) s), inside again; no exit, no enter" \
    "ok: inside, unknown, inside" "$verdict"
  check_contains "monitor sums up" "2 inside, 0 outside, 0 enter, 0 exit, 1 unknown" "$WORK/power.err"
}
