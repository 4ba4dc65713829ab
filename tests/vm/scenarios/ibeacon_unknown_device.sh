# shellcheck shell=bash
# Scenario ibeacon_unknown_device: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_ibeacon_unknown_device() {
  need_bin || return
  ib info --device hci9 > "$WORK/hci9.txt" 2>&1
  check_status "ibeacon info --device hci9 (EX_UNAVAILABLE)" 69 $? "$WORK/hci9.txt"
  check_contains "message lists hci0" hci0 "$WORK/hci9.txt"
  check_contains "message lists hci1" hci1 "$WORK/hci9.txt"
}

# Prints "match" when the JSON lines of `ibeacon scan --json` in $1 contain the profile's beacon,
# else a summary of what they contain.
scan_saw_profile() {
  "$PY" - "$1" "$P_UUID" "$P_MAJOR" "$P_MINOR" "$P_POWER" <<'PYEOF'
import json, sys
path, u, major, minor, power = sys.argv[1], sys.argv[2].upper(), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
lines = [l for l in open(path).read().splitlines() if l.strip()]
seen = []
for l in lines:
    try:
        o = json.loads(l)
    except ValueError:
        seen.append("not JSON: " + l[:80]); continue
    t = (str(o.get("uuid", "")).upper(), o.get("major"), o.get("minor"), o.get("measuredPower"))
    if t == (u, major, minor, power):
        print("match"); sys.exit()
    seen.append("uuid=%s major=%s minor=%s measuredPower=%s" % t)
print("; ".join(seen[:3]) if seen else "no JSON lines")
PYEOF
}
