# shellcheck shell=bash
# Scenario kernel_mqtt_control: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# `advertise --mqtt-control` through the kernel, next to bluetoothd: a command published to
# mosquitto changes the beacon's instance in place. hcidump -t -R on hci0 records every command
# the kernel sends the controller; replayed in order (which set is enabled, which data it
# carries), it must show no moment with the old and the new beacon both enabled, and no moment
# without either longer than 1 s. The profile and the retained settings carry the new value,
# and hci1 (kernel LE discovery) hears it.
scenario_kernel_mqtt_control() {
  need_bin || return
  need_profile || return
  command -v mosquitto > /dev/null || { skip "mosquitto not installed (make test-deps)"; return; }
  ip link set lo up 2>/dev/null
  local port=18831 base=vm/ctl name profile=$WORK/ctl-beacon.json dump=$WORK/hcidump-hci0-ctl.txt
  cp "$PROFILE" "$profile"
  name=$(basename "$profile" .json)
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n' "$port" > "$WORK/mosquitto-ctl.conf"
  mosquitto -c "$WORK/mosquitto-ctl.conf" > "$WORK/mosquitto-ctl.log" 2>&1 &
  local broker=$!
  BG_PIDS+=("$broker")
  need_bluetoothd || return
  stdbuf -oL hcidump -i hci0 -t -R > "$dump" 2>&1 &
  local hd=$!
  BG_PIDS+=("$hd")
  poll 10 grep -q '^device: hci0' "$dump"
  "$IBEACON_BIN" advertise --device hci0 --profile "$profile" --mqtt "mqtt://127.0.0.1:$port" --mqtt-base "$base" \
    --mqtt-control > "$WORK/ctl-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  poll 30 grep -q "through the kernel" "$WORK/ctl-adv.txt" || { fail "advertiser started" "a status line" "$(tr '\n' ' ' < "$WORK/ctl-adv.txt")"; stop_pid "$adv" 5; stop_pid "$hd" 5; return; }
  poll 10 eval '[ -n "$(ctl_settings $port $base $name)" ]'
  sleep 2
  local sent
  sent=$(date +%s.%N)
  mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -t "$base/beacon/$name/set/major" -m 4242
  poll 10 eval 'ctl_settings $port $base $name | grep -q "\"major\":4242"'
  check_contains "settings published after the change" '"major":4242' <(ctl_settings $port $base $name)
  check_contains "the profile holds the new major" '"major": 4242' "$profile"
  kernel_observe 4
  # 4242 = 0x1092: the iBeacon's major field, big-endian.
  local heard
  heard=$(dump_packets "$HCIDUMP_FILE" | grep -E '^> 04 3E .. (02|0D) ' | grep -c -- "4C 00 02 15 .* 10 92 ")
  if [ "$heard" -ge 1 ]; then pass "hci1 hears the new major" "$heard report(s)"; else fail "hci1 hears the new major" "a report with major 0x1092" "$(observer_seen)"; fi
  sleep 0.5
  stop_pid "$hd" 5
  local verdict
  verdict=$("$PY" - "$dump" "$sent" <<'PYEOF'
import re, sys, datetime
path, sent = sys.argv[1], float(sys.argv[2])
packets, cur = [], None
for line in open(path, errors="replace"):
    m = re.match(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) ([<>]) (.*)$", line.rstrip())
    if m:
        if cur: packets.append(cur)
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
        cur = [t, m.group(2), m.group(3).split()]
    elif cur and line.startswith(" "):
        cur[2] += line.split()
if cur: packets.append(cur)
enabled, data, onair = {}, {}, []
def ident(d):
    s = " ".join(d)
    m = re.search(r"4C 00 02 15 ((?:[0-9A-F]{2} ){16})([0-9A-F]{2} [0-9A-F]{2}) ([0-9A-F]{2} [0-9A-F]{2})", s)
    return (m.group(2), m.group(3)) if m else None
for t, d, b in packets:
    if d != "<" or len(b) < 4 or b[0] != "01": continue
    op, p = b[2] + b[1], b[4:]
    if op == "2039" and len(p) >= 2:   # LE Set Extended Advertising Enable
        en, n = p[0] == "01", int(p[1], 16)
        handles = [p[2 + 4 * i] for i in range(n)] if n else list(enabled)
        for h in handles: enabled[h] = en
    elif op == "200A" and p: enabled["L"] = p[0] == "01"
    elif op == "2037" and len(p) >= 4: data[p[0]] = p[4:4 + int(p[3], 16)]
    elif op == "2008" and p: data["L"] = p[1:1 + int(p[0], 16)]
    else: continue
    onair.append((t, {ident(data.get(h, [])) for h, e in enabled.items() if e} - {None}))
both = [t for t, s in onair if len(s) > 1]
window = [(t, s) for t, s in onair if t >= sent - 0.5]
gap, start = 0.0, None
for t, s in window:
    if not s and start is None: start = t
    if s and start is not None: gap, start = max(gap, t - start), None
if start is not None: gap = float("inf")
idents = sorted({i for _, s in window for i in s})
print(f"{len(both)} {gap:.3f} {len(window)} {idents}")
PYEOF
)
  echo "    hci0 commands replayed: $verdict"
  check_eq "never the old and the new beacon on the air together" "0" "${verdict%% *}"
  local gap
  gap=$(cut -d' ' -f2 <<< "$verdict")
  if awk -v g="$gap" 'BEGIN { exit !(g <= 1.0) }'; then pass "the beacon off for at most 1 s" "${gap} s"; else fail "the beacon off for at most 1 s" "<= 1.000 s" "$gap s"; fi
  check_contains "the new major was programmed" "'10 92'" <(echo "$verdict")
  stop_advertiser "$adv" "$WORK/ctl-adv.txt"
  check_contains "the command is in the journal" "command applied" "$WORK/ctl-adv.txt"
  stop_pid "$broker" 5
  bluetoothd_stop
}

ctl_settings() {  # ctl_settings PORT BASE NAME → the retained settings JSON
  timeout 5 mosquitto_sub -h 127.0.0.1 -p "$1" -t "$2/beacon/$3/settings" --retained-only -W 1 2>/dev/null | head -1
}
