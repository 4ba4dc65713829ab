# shellcheck shell=bash
# Scenario ibeacon_devices: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_ibeacon_devices() {
  need_bin || return
  ib devices > "$WORK/devices.txt" 2>&1
  check_status "ibeacon devices" 0 $? "$WORK/devices.txt"
  check_contains "devices lists hci0" hci0 "$WORK/devices.txt"
  check_contains "devices lists hci1" hci1 "$WORK/devices.txt"
  # No bluetoothd here: the kernel has the adapters up with LE off, so raw HCI is the path.
  check_eq "devices: path without bluetoothd" "hci0 raw" "$(awk '$1 == "hci0" { print $1, $NF }' "$WORK/devices.txt")"
  ib devices --json > "$WORK/devices.json" 2>"$WORK/devices.err"
  check_status "ibeacon devices --json" 0 $? "$WORK/devices.err"
  # JSON (one document or JSON lines) with an object naming hci0 and its address, and one for hci1.
  local seen
  seen=$("$PY" - "$WORK/devices.json" <<'PYEOF'
import json, sys
text = open(sys.argv[1]).read()
try:
    docs = [json.loads(text)]
except ValueError:
    try:
        docs = [json.loads(l) for l in text.splitlines() if l.strip()]
    except ValueError as e:
        print("not JSON: %s: %r" % (e, text[:200])); sys.exit()
objs = []
def walk(o):
    if isinstance(o, dict):
        objs.append(o); [walk(v) for v in o.values()]
    elif isinstance(o, list):
        [walk(v) for v in o]
[walk(d) for d in docs]
found = []
for name in ("hci0", "hci1"):
    for o in objs:
        vals = [v for v in o.values() if isinstance(v, str)]
        if name in vals:
            addrs = [v.upper() for v in vals if len(v) == 17 and v.count(":") == 5]
            found.append("%s=%s" % (name, addrs[0] if addrs else "no-address"))
            break
    else:
        found.append("%s=absent" % name)
print(" ".join(found))
PYEOF
)
  check_eq "devices --json: names and addresses" "hci0=$HCI0_ADDR hci1=$HCI1_ADDR" "$seen"
}
