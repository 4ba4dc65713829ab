# shellcheck shell=bash
# The VM suite's library: settings, reporting, processes, HCI and bluetoothd helpers, the tool.
# Sourced by tests/vm/guest-test.sh; each scenario is one file in tests/vm/scenarios/.

IBEACON_BIN=${IBEACON_BIN:-.build/release/ibeacon}
IBEACON_REQUIRE_BIN=${IBEACON_REQUIRE_BIN:-0}
PROFILE=${IBEACON_PROFILE:-profiles/store12.json}
PY=/usr/bin/python3        # Debian's; a pyenv python first on PATH may lack AF_BLUETOOTH
HCI0_ADDR=00:AA:01:00:00:00
HCI1_ADDR=00:AA:01:01:00:01
TEST_USER=ibeacon-test

case $IBEACON_BIN in /*) ;; *) IBEACON_BIN=$PWD/$IBEACON_BIN;; esac
case $PROFILE in /*) ;; *) PROFILE=$PWD/$PROFILE;; esac

WORK=$(mktemp -d /tmp/guest-test.XXXXXX)
chmod 755 "$WORK"          # the unprivileged scenario reads its binary and profile from here

PASSED=0
FAILED=0
SKIPPED=0
FAILED_CHECKS=()   # repeated under the summary, so a log cut in the middle still names them
CURRENT=setup
BG_PIDS=()
BTVIRT_PID=
HCIDUMP_PID=
HCIDUMP_FILE=

# --- reporting --------------------------------------------------------------------------------

clip() { local s=$1; [ ${#s} -le 400 ] && printf '%s' "$s" || printf '%s…(%d chars)' "${s:0:400}" ${#s}; }

pass() { PASSED=$((PASSED + 1)); echo "PASS  $CURRENT: $1${2:+ — $2}"; }

fail() {  # fail WHAT EXPECTED SEEN
  FAILED=$((FAILED + 1))
  FAILED_CHECKS+=("$CURRENT: $1 — seen: $(clip "$3")")
  echo "FAIL  $CURRENT: $1"
  echo "        expected: $(clip "$2")"
  echo "        seen:     $(clip "$3")"
}

skip() { SKIPPED=$((SKIPPED + 1)); echo "SKIP  $CURRENT: $1"; }

check_eq() {  # check_eq WHAT EXPECTED SEEN
  if [ "$2" = "$3" ]; then pass "$1" "$3"; else fail "$1" "$2" "$3"; fi
}

check_status() {  # check_status WHAT EXPECTED ACTUAL [OUTPUT-FILE]
  if [ "$2" = "$3" ]; then
    pass "$1" "exit $3"
  else
    fail "$1" "exit $2" "exit $3${4:+; output: $(tr '\n' ' ' < "$4")}"
  fi
}

check_contains() {  # check_contains WHAT NEEDLE FILE  (case-insensitive, fixed string)
  if grep -qiF -- "$2" "$3"; then
    pass "$1" "\"$2\""
  else
    fail "$1" "output containing \"$2\"" "$(tr '\n' ' ' < "$3")"
  fi
}

# --- processes --------------------------------------------------------------------------------
# Every background process is waited for by PID (never a bare `wait`: btvirt never exits).

# poll SECS CMD... → 0 as soon as CMD succeeds, 1 when SECS (wall clock) have passed.
# (Deadlines, not iteration counts: under TCG every process start costs a noticeable time.)
poll() {
  local end=$((SECONDS + $1))
  shift
  while :; do
    "$@" && return 0
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}
alive() { kill -0 "$1" 2>/dev/null; }
dead() { ! kill -0 "$1" 2>/dev/null; }

bg_forget() { local p keep=(); for p in "${BG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done; BG_PIDS=("${keep[@]}"); }

stop_pid() {  # stop_pid PID [SECS] → sets STOPPED_STATUS (exit status; 124 if it had to be killed)
  local pid=$1 secs=${2:-10}
  kill -TERM "$pid" 2>/dev/null
  poll "$secs" dead "$pid"
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    STOPPED_STATUS=124
  else
    wait "$pid" 2>/dev/null
    STOPPED_STATUS=$?
  fi
  bg_forget "$pid"
}

# SIGKILL to an advertiser through the kernel and to the guardian it started (`ibeacon stop
# --after-exit-of PID`, which would otherwise remove its instances at once), as `kill -9` of
# everything would: what is left for `ibeacon stop` to clean up.
kill_with_guardian() {
  local g
  g=$(pgrep -f -- "--after-exit-of $1 ")
  [ -n "$g" ] && kill -KILL $g
  kill -KILL "$1"; wait "$1" 2>/dev/null; bg_forget "$1"
}

# stop_advertiser PID LOG: the advertiser must still be running, and exit 0 on SIGTERM.
stop_advertiser() {
  if dead "$1"; then
    wait "$1" 2>/dev/null
    fail "advertiser runs until SIGTERM" "running" "already exited ($?): $(tr '\n' ' ' < "$2")"
    bg_forget "$1"
    return
  fi
  pass "advertiser runs until SIGTERM" "pid $1"
  stop_pid "$1" 15
  check_status "advertiser exits 0 on SIGTERM" 0 "$STOPPED_STATUS" "$2"
}

cleanup() {
  local p
  for p in "${BG_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  if [ -n "$BTVIRT_PID" ]; then kill -TERM "$BTVIRT_PID" 2>/dev/null; wait "$BTVIRT_PID" 2>/dev/null; fi
}
trap cleanup EXIT

# --- HCI helpers (BlueZ tools only) -----------------------------------------------------------

hex() { tr -dc '0-9A-Fa-f' | tr a-f A-F | sed 's/../& /g; s/ $//'; }

# hci_cmd DEV OGF OCF [PARAM...] → 0 when the controller answered Command Complete with status 0.
# Sets HCI_STATUS to the status byte seen (or "none").
hci_cmd() {
  local dev=$1 out
  shift
  out=$(timeout 10 hcitool -i "$dev" cmd "$@" 2>&1)
  # The reply's parameters are the last line: Num_HCI_Command_Packets, opcode (2), status.
  HCI_STATUS=$(printf '%s\n' "$out" | tail -1 | awk 'NF >= 4 { print $4; exit }')
  HCI_STATUS=${HCI_STATUS:-none}
  [ "$HCI_STATUS" = 00 ]
}

# One packet per line, as hcidump -R prints them ("> 04 3E 2A ..."), joining continuation lines.
dump_packets() {
  awk '/^[<>] / { if (p != "") print p; p = $0; sub(/ +$/, "", p); next }
       /^  / { if (p != "") { sub(/^ +/, ""); sub(/ +$/, ""); p = p " " $0 }; next }
       END { if (p != "") print p }' "$1"
}

# Controller → host LE Advertising Reports (legacy, subevent 0x02) or Extended ones (0x0D)
# whose bytes contain DATA (hex with spaces).
reports_with() {
  [ -n "$HCIDUMP_FILE" ] && [ -f "$HCIDUMP_FILE" ] || return 0
  dump_packets "$HCIDUMP_FILE" | grep -E '^> 04 3E .. (02|0D) ' | grep -F -- "$1"
}
count_reports_with() { reports_with "$1" | wc -l; }

# Power-cycle a controller: the kernel sends HCI Reset, which ends any advertising or scanning
# and forgets whether legacy or extended commands were used (Core 5.4 Vol 4 Part E §7.3.2).
reset_controller() {
  timeout 10 hciconfig "$1" down && timeout 10 hciconfig "$1" up
}

# Start observing hci1: fresh controller state, hcidump -R capturing raw bytes, passive scan
# (LE Set Scan Parameters 0x200B: passive, 10 ms interval and window; LE Set Scan Enable 0x200C
# with duplicate filtering off). Returns non-zero (and explains) when that did not work.
observer_start() {
  observer_stop
  reset_controller hci1 || { echo "observer: cannot power-cycle hci1"; return 1; }
  HCIDUMP_FILE=$WORK/hcidump-hci1.$((++OBSERVER_SEQ)).txt
  stdbuf -oL hcidump -i hci1 -R > "$HCIDUMP_FILE" 2>&1 &
  HCIDUMP_PID=$!
  BG_PIDS+=("$HCIDUMP_PID")
  poll 10 grep -q '^device: hci1' "$HCIDUMP_FILE"
  grep -q '^device: hci1' "$HCIDUMP_FILE" || { echo "observer: hcidump did not start: $(cat "$HCIDUMP_FILE")"; return 1; }
  hci_cmd hci1 0x08 0x000B 00 10 00 10 00 00 00 || { echo "observer: LE Set Scan Parameters status $HCI_STATUS"; return 1; }
  hci_cmd hci1 0x08 0x000C 01 00 || { echo "observer: LE Set Scan Enable status $HCI_STATUS"; return 1; }
}
OBSERVER_SEQ=0

# observer_start in this shell (not a $(...) subshell: it records hcidump's PID), FAIL on error.
observer_start_or_fail() {
  if observer_start > "$WORK/observer.err" 2>&1; then return 0; fi
  fail "scan on hci1" "scanning with hcidump running" "$(tr '\n' ' ' < "$WORK/observer.err")"
  return 1
}

# Scan disable + enable on hci1: btvirt then reports a running advertisement once more.
observer_rescan() {
  hci_cmd hci1 0x08 0x000C 00 00
  hci_cmd hci1 0x08 0x000C 01 00
}

observer_stop() {
  [ -n "$HCIDUMP_PID" ] || return 0
  hci_cmd hci1 0x08 0x000C 00 00
  sleep 0.3                        # let hcidump write what is in flight
  stop_pid "$HCIDUMP_PID" 5
  HCIDUMP_PID=
}

# observer_wait DATA SECS [MIN] → 0 once at least MIN (default 1) reports carry DATA.
observer_wait() {
  local data=$1 min=${3:-1} end=$((SECONDS + $2))
  while :; do
    [ "$(count_reports_with "$data")" -ge "$min" ] && return 0
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.25
  done
}

# What hci1 heard so far, for FAIL messages.
observer_seen() {
  local r
  r=$(dump_packets "$HCIDUMP_FILE" 2>/dev/null | grep -E '^> 04 3E .. (02|0D) ' | tail -3 | tr '\n' '|')
  echo "${r:-no LE advertising report on hci1}"
}

# Legacy advertising on hci0 with BlueZ tools: ADV_NONCONN_IND at 100 ms carrying DATA (30 bytes).
raw_advertise() {
  local data=$1 n
  n=$(printf '%02X' $(( $(wc -w <<< "$data") )))
  # LE Set Advertising Parameters (0x2006), Core 5.4 Vol 4 Part E §7.8.5:
  #   A0 00 = Advertising_Interval_Min 0x00A0 × 0.625 ms = 100 ms, A0 00 = Max the same,
  #   03 = ADV_NONCONN_IND, 00 = public own address, 00 + 6×00 = no peer, 07 = all three
  #   channels, 00 = no filter policy
  hci_cmd hci0 0x08 0x0006 A0 00 A0 00 03 00 00 00 00 00 00 00 00 07 00 || return 1
  # LE Set Advertising Data (0x2008), §7.8.7: length, then 31 bytes zero-padded
  local pad=() i
  for ((i = $(wc -w <<< "$data"); i < 31; i++)); do pad+=(00); done
  # shellcheck disable=SC2086
  hci_cmd hci0 0x08 0x0008 "$n" $data "${pad[@]}" || return 1
  # LE Set Advertising Enable (0x200A), §7.8.9: 01 = enabled
  hci_cmd hci0 0x08 0x000A 01
}

raw_advertise_stop() { hci_cmd hci0 0x08 0x000A 00; }

# --- bluetoothd and the kernel's management interface -------------------------------------------

BLUETOOTHD_PID=
# dbus-daemon + bluetoothd as a distribution runs them; bluetoothd powers the adapters itself.
bluetoothd_start() {
  mkdir -p /run/dbus
  [ -S /run/dbus/system_bus_socket ] || dbus-daemon --system --fork 2>"$WORK/dbus.err"
  /usr/libexec/bluetooth/bluetoothd -n "$@" > "$WORK/bluetoothd.log" 2>&1 &
  BLUETOOTHD_PID=$!
  BG_PIDS+=("$BLUETOOTHD_PID")
  poll 15 mgmt_powered 0 && poll 15 mgmt_powered 1
}
bluetoothd_stop() {
  [ -n "$BLUETOOTHD_PID" ] || return 0
  stop_pid "$BLUETOOTHD_PID" 5
  BLUETOOTHD_PID=
}
# btmgmt prints nothing without a terminal.
btmgmt_tty() { timeout 20 script -qc "btmgmt $*" /dev/null | tr -d '\r'; }
mgmt_lists() { local i; for i in "$@"; do btmgmt_tty --index "$i" info | grep -q '^hci'"$i"':' || return 1; done; }
mgmt_powered() { btmgmt_tty --index "$1" info | grep -q 'current settings:.*powered'; }
# How many advertising instances the kernel holds for hciN (btmgmt 5.66 prints the count only).
mgmt_instances() {
  btmgmt_tty --index "$1" advinfo | awk '/^Instances list with/ { print $4; found = 1 } END { if (!found) print "?" }'
}

# LE discovery on hci1 through the kernel (as bluetoothd would scan) with hcidump recording what
# hci1 receives: every advertiser running on hci0 is reported (btvirt: once per scan enable).
kernel_observe() {  # kernel_observe SECS → sets HCIDUMP_FILE
  HCIDUMP_FILE=$WORK/hcidump-hci1.$((++OBSERVER_SEQ)).txt
  stdbuf -oL hcidump -i hci1 -R > "$HCIDUMP_FILE" 2>&1 &
  local dump=$!
  BG_PIDS+=("$dump")
  poll 10 grep -q '^device: hci1' "$HCIDUMP_FILE"
  btmgmt_tty --index 1 find -l > "$WORK/find.$OBSERVER_SEQ.txt" 2>&1 &
  local find=$!
  sleep "$1"
  kill "$find" 2>/dev/null; wait "$find" 2>/dev/null
  btmgmt_tty --index 1 stop-find -l > /dev/null 2>&1
  sleep 0.3
  stop_pid "$dump" 5
}
OTHER_ADV="CA FE 01 02"     # the other program's advertisement: 07 FF FF FF CA FE 01 02
# on_air WHAT SECS NAME=HEX=yes|no...: hci1 listens for SECS; each advertisement heard (yes) or not (no)
on_air() {
  local what=$1 spec name hex want n ok=1 seen=
  kernel_observe "$2"
  shift 2
  for spec in "$@"; do
    IFS== read -r name hex want <<< "$spec"
    n=$(count_reports_with "$hex")
    seen+="$name $n, "
    { [ "$want" = yes ] && [ "$n" -gt 0 ]; } || { [ "$want" = no ] && [ "$n" -eq 0 ]; } || ok=0
  done
  if [ "$ok" = 1 ]; then pass "$what" "${seen%, } reports"; else fail "$what" "$*" "${seen%, } reports"; fi
}

# second_profile OUT: writes $PROFILE with the minor one higher to OUT (a second beacon) and
# prints its expected advertising data (after need_profile).
second_profile() {
  "$PY" - "$PROFILE" "$1" <<'PYEOF'
import json, sys
def bump(o):
    if isinstance(o, dict):
        if "major" in o and "minor" in o:
            o["minor"] = (int(o["minor"]) + 1) % 65536
            return True
        return any(bump(v) for v in o.values())
    if isinstance(o, list):
        return any(bump(v) for v in o)
    return False
p = json.load(open(sys.argv[1]))
bump(p)
p.pop("calibration", None)
json.dump(p, open(sys.argv[2], "w"))
PYEOF
  # P_ADV ends with major, minor (big-endian) and the measured power
  local m=$(((P_MINOR + 1) % 65536))
  printf '%s %02X %02X %02X %02X %02X\n' "${P_ADV% ?? ?? ?? ?? ??}" $((P_MAJOR >> 8)) $((P_MAJOR & 255)) \
    $((m >> 8)) $((m & 255)) $((P_POWER & 255))
}

# --- profile → expected iBeacon bytes, encoded here independently of the tool ------------------
# Prints shell assignments P_UUID, P_MAJOR, P_MINOR, P_POWER, P_ADV (30 bytes, hex with spaces).
# Looks for the object holding "major" and "minor" anywhere in the profile; the UUID key may be
# "proximityUUID", "proximityUuid" or "uuid".
encode_profile() {
  "$PY" - "$1" <<'PYEOF'
import json, sys, uuid
def find(o):
    if isinstance(o, dict):
        if "major" in o and "minor" in o:
            return o
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
    elif isinstance(o, list):
        for v in o:
            r = find(v)
            if r is not None:
                return r
    return None
with open(sys.argv[1]) as f:
    b = find(json.load(f))
if b is None:
    sys.exit("no object with major and minor in " + sys.argv[1])
u = next((b[k] for k in ("proximityUUID", "proximityUuid", "uuid") if k in b), None)
if u is None or "measuredPower" not in b:
    sys.exit("profile lacks proximityUUID/uuid or measuredPower")
u = uuid.UUID(u)
major, minor, power = int(b["major"]), int(b["minor"]), int(b["measuredPower"])
data = (bytes([0x02, 0x01, 0x06,        # AD: Flags = LE General Discoverable, BR/EDR not supported
               0x1A, 0xFF,              # AD: 26 bytes of Manufacturer Specific Data
               0x4C, 0x00,              # company 0x004C (Apple), little-endian
               0x02, 0x15])             # iBeacon type 0x02, 21 bytes follow
        + u.bytes                       # proximity UUID, big-endian as written
        + major.to_bytes(2, "big") + minor.to_bytes(2, "big")
        + (power & 0xFF).to_bytes(1, "big"))  # measured power, two's complement
print("P_UUID=%s P_MAJOR=%d P_MINOR=%d P_POWER=%d" % (str(u).upper(), major, minor, power))
print("P_ADV='%s'" % " ".join("%02X" % x for x in data))
PYEOF
}

# --- the tool ---------------------------------------------------------------------------------

need_bin() {
  if [ -x "$IBEACON_BIN" ]; then return 0; fi
  if [ "$IBEACON_REQUIRE_BIN" = 1 ]; then
    fail "ibeacon binary present" "an executable at $IBEACON_BIN (IBEACON_REQUIRE_BIN=1)" "missing"
  else
    skip "needs the ibeacon binary at $IBEACON_BIN (not built); set IBEACON_REQUIRE_BIN=1 to fail instead"
  fi
  return 1
}

need_venv() {  # the test virtualenv's python (make venv), in VENV_PY
  VENV_PY=.venv/bin/python
  [ -x "$VENV_PY" ] && return 0
  fail "test virtualenv" ".venv/bin/python (make venv)" "missing"
  return 1
}
need_bluetoothd() {  # bluetoothd running with hci0 and hci1 powered, or a FAIL saying why not
  bluetoothd_start && return 0
  fail "bluetoothd powers hci0 and hci1" "powered" "$(tail -5 "$WORK/bluetoothd.log" | tr '\n' ' ')"
  return 1
}
need_profile() {
  local out
  if ! out=$(encode_profile "$PROFILE" 2>&1); then
    fail "profile readable" "a profile with proximityUUID, major, minor, measuredPower at $PROFILE" "$out"
    return 1
  fi
  eval "$out"
}

ib() { timeout 60 "$IBEACON_BIN" "$@"; }   # foreground runs, bounded
# calibrate with its default --duration (180 s): a run ends when ±1 dB is reached, usually in
# 10-15 s, but a false alarm of the slow-variation test or a slow scan can take minutes.
ib_calibrate() { timeout 240 "$IBEACON_BIN" calibrate "$@"; }

# vhci_harness NAME PYTHON ROLE: a Bumble controller on /dev/vhci (tests/harness, --scanner and
# --ROLE: central or peripheral) that bluetoothd powers, its stdin a fifo held open on fd 7, its
# output in $WORK/NAME-vhci.out/.err. Sets VHCI_PID and VHCI_HCI (hciN); or FAILs, cleans up and
# returns 1.
vhci_harness() {
  local name=$1 py=$2 role=$3 fifo=$WORK/$1.in
  rm -f "$fifo"; mkfifo "$fifo"
  "$py" tests/harness/bumble_harness.py --vhci --keep-running --scanner "--$role" --no-adv-delay \
    < "$fifo" > "$WORK/$name-vhci.out" 2> "$WORK/$name-vhci.err" &
  VHCI_PID=$!
  BG_PIDS+=("$VHCI_PID")
  exec 7> "$fifo"
  poll 180 grep -q '"event": *"ready"' "$WORK/$name-vhci.out"
  VHCI_HCI=$(grep -o '"hci": *"hci[0-9]*"' "$WORK/$name-vhci.out" | grep -o 'hci[0-9][0-9]*' | head -1)
  if [ -z "$VHCI_HCI" ] || ! poll 15 mgmt_powered "${VHCI_HCI#hci}"; then
    fail "Bumble controller with a $role on /dev/vhci, powered by bluetoothd" "a new powered adapter" "${VHCI_HCI:-none}: $(tail -3 "$WORK/$name-vhci.err" | tr '\n' ' ')"
    exec 7>&-; stop_pid "$VHCI_PID" 15; bluetoothd_stop
    return 1
  fi
}
