# shellcheck shell=bash
# Scenario ibeacon_monitor: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# `ibeacon monitor` through hci1 while hci0 advertises the profile with `ibeacon advertise`:
# the region starts outside, is entered while the beacon is on the air, is not exited while it
# stays on, and is exited once the advertiser has stopped. btvirt reports an advertiser once per
# advertise-enable, so "on the air" is a run of short advertisers back to back (each start is
# one report on hci1); the checks are on the events, whatever path hciN takes.
scenario_ibeacon_monitor() {
  need_bin || return
  need_profile || return
  reset_controller hci0
  reset_controller hci1
  local exit_after=8
  "$IBEACON_BIN" monitor ${IBEACON_VM_VERBOSE:-} --device hci1 --profile "$PROFILE" --exit-after $exit_after --json \
    > "$WORK/monitor.jsonl" 2>"$WORK/monitor.err" &
  local mon=$!
  BG_PIDS+=("$mon")
  # Nothing advertises yet: the initial state is reported once the first window has passed.
  if ! poll 40 grep -q '"event":"outside"' "$WORK/monitor.jsonl"; then
    fail "initial state outside" "an outside event" "$(tr '\n' ' ' < "$WORK/monitor.jsonl"); $(tr '\n' ' ' < "$WORK/monitor.err")"
    stop_pid "$mon" 10
    return
  fi
  pass "initial state outside" "$(head -1 "$WORK/monitor.jsonl" | cut -c1-100)"
  # On the air for about 20 s, well over twice the exit-after.
  local on_until=$((SECONDS + 20)) runs=0
  while [ $SECONDS -lt $on_until ]; do
    "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" --duration 2 >> "$WORK/monitor-adv.txt" 2>&1
    runs=$((runs + 1))
  done
  local off_at
  off_at=$(date +%s.%N)
  poll 30 grep -q '"event":"exit"' "$WORK/monitor.jsonl"
  stop_pid "$mon" 10
  check_status "monitor ends on SIGTERM with 0" 0 "$STOPPED_STATUS" "$WORK/monitor.err"
  local verdict
  verdict=$("$PY" - "$WORK/monitor.jsonl" "$off_at" "$exit_after" "$P_UUID" "$P_MAJOR" "$P_MINOR" <<'PYEOF'
import datetime, json, sys
path, off_at, exit_after = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ident = (sys.argv[4].upper(), int(sys.argv[5]), int(sys.argv[6]))
events = [json.loads(l) for l in open(path) if l.strip()]
# The run ends with one final state line per region (issue 24).
finals = [e for e in events if e["event"] == "state"]
events = [e for e in events if e["event"] != "state"]
kinds = [e["event"] for e in events]
def when(e):
    return datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
problems = []
if kinds != ["outside", "enter", "exit"]:
    problems.append("events %s, expected outside, enter, exit" % kinds)
for e in events:
    if e["event"] != "outside" and (e["uuid"].upper(), e["major"], e["minor"]) != ident:
        problems.append("%s by %s" % (e["event"], (e["uuid"], e["major"], e["minor"])))
    if e["region"] != "Store 12 entrance":
        problems.append("region %r" % e["region"])
exits = [e for e in events if e["event"] == "exit"]
if exits:
    late = when(exits[0]) - off_at
    # Not while the advertisers ran (the last one may have been heard just before off_at),
    # and within exit-after (+ slack for the emulated machine) of the last one.
    if not (-1.0 <= late <= exit_after + 4):
        problems.append("exit %.1f s after the advertisers stopped (exit-after %g)" % (late, exit_after))
if [(e["state"], e["final"]) for e in finals] != [("outside", True)]:
    problems.append("final states %s" % finals)
print("; ".join(problems) if problems else "ok: " + ", ".join(kinds))
PYEOF
)
  check_eq "monitor: outside, enter while advertised ($runs advertiser runs), exit after it stopped" \
    "ok: outside, enter, exit" "$verdict"
  check_contains "monitor sums up" "0 inside, 1 outside, 1 enter, 1 exit, 0 unknown" "$WORK/monitor.err"
}
