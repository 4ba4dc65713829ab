# shellcheck shell=bash
# Scenario kernel_mqtt: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_kernel_mqtt() {
  need_bin || return
  need_profile || return
  command -v mosquitto > /dev/null || { skip "mosquitto not installed (make test-deps)"; return; }
  ip link set lo up 2>/dev/null
  local port=18830
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n' "$port" > "$WORK/mosquitto.conf"
  mosquitto -c "$WORK/mosquitto.conf" > "$WORK/mosquitto.log" 2>&1 &
  local broker=$!
  BG_PIDS+=("$broker")
  need_bluetoothd || return
  local name base=vm/box
  name=$(basename "$PROFILE" .json)
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" --mqtt "mqtt://127.0.0.1:$port" --mqtt-base "$base" \
    > "$WORK/mqtt-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  poll 30 grep -q "through the kernel" "$WORK/mqtt-adv.txt" || { fail "advertiser started" "a status line" "$(tr '\n' ' ' < "$WORK/mqtt-adv.txt")"; stop_pid "$adv" 5; return; }
  poll 10 eval '[ "$(retained_mqtt $port $base/beacon/$name/state)" = ON ]'
  check_eq "beacon state retained" "ON" "$(retained_mqtt $port "$base/beacon/$name/state")"
  check_contains "status advertising" '"status":"advertising"' <(retained_mqtt $port "$base/beacon/$name/attributes")
  check_eq "availability" "online" "$(retained_mqtt $port "$base/advertise/availability")"
  btmgmt_tty --index 0 power off > /dev/null
  poll 10 eval '[ "$(retained_mqtt $port $base/beacon/$name/state)" = OFF ]'
  check_contains "powered off: recovering with its cause" '"status":"recovering"' <(retained_mqtt $port "$base/beacon/$name/attributes")
  btmgmt_tty --index 0 power on > /dev/null
  poll 10 eval '[ "$(retained_mqtt $port $base/beacon/$name/state)" = ON ]'
  check_eq "powered on: advertising again" "ON" "$(retained_mqtt $port "$base/beacon/$name/state")"
  check_contains "the last recovery's cause" '"lastRecoveryCause":"hci0 was powered' <(retained_mqtt $port "$base/beacon/$name/attributes")
  stop_advertiser "$adv" "$WORK/mqtt-adv.txt"
  check_contains "stopped on SIGTERM" '"status":"stopped"' <(retained_mqtt $port "$base/beacon/$name/attributes")
  check_eq "offline on a clean exit" "offline" "$(retained_mqtt $port "$base/advertise/availability")"
  check_eq "no MQTT warning with the broker up throughout" "0" "$(grep -c 'warning.*MQTT' "$WORK/mqtt-adv.txt")"
  sed 's/^/        advertiser: /' "$WORK/mqtt-adv.txt" | grep -i mqtt | head -5
  stop_pid "$broker" 5
  bluetoothd_stop
}

# 8. A central (a phone's BLE stack) in range of the kernel-path beacon: the default profile goes
#    out connectable from the adapter's identity address, and the kernel stops advertising an
#    instance while a central is connected to it. The harness's --central connects as soon as the
#    beacon is heard, holds the link (its GATT server answers bluetoothd), reads the Device Name,
#    and connects again the moment it is dropped; the harness's scanner is the observer. The
#    beacon must be heard in at least 9 of every 10 one-second buckets, and the advertiser's
#    systemd status must never say "advertising" while a central holds the link.
central_report() {  # central_report HARNESS-OUT NOTIFY-FILE T0 T1 MINOR → key=value pairs
  "$PY" - "$@" <<'PYEOF'
import json, math, sys
path, notify, t0, t1, minor = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
advs, links, reads, failed_reads, held = [], [], 0, 0, []
start = None
for line in open(path):
    try:
        o = json.loads(line)
    except ValueError:
        continue
    if o.get("event") == "adv" and o.get("ibeacon") and int(o["ibeacon"]["minor"]) == minor:
        advs.append(o["t"])
    elif o.get("event") == "central":
        if o["what"] == "connected":
            start = o["t"]
        elif o["what"] == "disconnected" and start is not None:
            links.append((start, o["t"]))
            held.append(o["t"] - start)
            start = None
        elif o["what"] == "read" and t0 <= o["t"] <= t1:
            reads += 1
        elif o["what"] == "read-failed" and t0 <= o["t"] <= t1:
            failed_reads += 1
if start is not None:
    links.append((start, math.inf))
statuses = []
for line in open(notify):
    t, _, text = line.rstrip("\n").partition(" ")
    if text.startswith("STATUS="):
        statuses.append((float(t), text[len("STATUS="):]))
def claimed(t):
    last = None
    for when, text in statuses:
        if when <= t:
            last = text
    return last or ""
# Time a central held the link while the status still said "advertising", sampled every 10 ms.
wrong, step = 0.0, 0.01
for a, b in links:
    t = a
    while t < min(b, t1 + 5):
        if claimed(t).startswith("advertising"):
            wrong += step
        t += step
buckets = int(t1 - t0)
heard = len({int(t - t0) for t in advs if t0 <= t < t0 + buckets})
inside = [h for (a, b), h in zip(links, held) if t0 <= a <= t1]
print("heard=%d/%d rate=%.1f links=%d held_max=%.3f held_mean=%.3f reads=%d read_failed=%d wrong_status=%.2f open=%d" % (
    heard, buckets, sum(1 for t in advs if t0 <= t < t1) / (t1 - t0), len(inside),
    max(inside, default=0), sum(inside) / len(inside) if inside else 0, reads, failed_reads, wrong,
    1 if links and links[-1][1] == math.inf else 0))
PYEOF
}
kv() { tr ' ' '\n' <<< "$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }

notify_listen() {  # notify_listen SOCKET OUT: prints "MONOTONIC-TIME LINE" for each sd_notify line
  "$PY" - "$1" > "$2" <<'PYEOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
while True:
    for line in s.recv(4096).decode(errors="replace").splitlines():
        print("%.3f %s" % (time.monotonic(), line), flush=True)
PYEOF
  NOTIFY_PID=$!
  BG_PIDS+=("$NOTIFY_PID")
  poll 10 test -S "$1"
}
