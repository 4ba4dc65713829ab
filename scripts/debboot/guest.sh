#!/bin/bash
# Runs inside the booted deb-boot VM (debboot-test.service, from the host's 9p share at
# /mnt/debboot), as root, as an operator would: apt installs the package, enables the units,
# and an independent scanner (btmgmt find + hcidump -R on hci1, BlueZ's tools) judges what goes
# on the air from hci0. btvirt stands in for the hardware (hci0: the box, hci1: a phone): on amd64
# `btvirt -l2` through hci_vhci; on arm64, whose Debian kernel has no hci_vhci, btvirt's server
# with each controller on a pty attached by hci_uart (btattach), as a Raspberry Pi's own
# controller sits on its UART. The steps and their checks are the same on both.
# One `PASS name` / `FAIL name: detail` line per step on the console; the host (run.sh) greps them.
#
# Phase 1 (first boot): install, enable --now, READY, heard, kill -> restart, stop -> silent,
# monitor starts, group ibeacon, security exposure, no seccomp denials; then reboot.
# Phase 2 (same disk): the beacon is on the air after boot, bluetooth restart, power cycle,
# upgrade, purge, no seccomp denials; then power off.
{
set -uo pipefail
SHARE=/mnt/debboot
STATE=/var/lib/debboot
mkdir -p "$STATE"
WORK=$(mktemp -d /run/debboot.XXXXXX)
# shellcheck disable=SC1091
. "$SHARE/expected.env"   # P_ADV (the profile's 30 advertising bytes), DEB, DEB_UP, VERSION_UP
PHASE=$(cat "$STATE/phase" 2>/dev/null || echo 1)
passed=0 failed=0
pass() { echo "PASS $1${2:+ ($2)}"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: ${2:-}"; failed=$((failed + 1)); }
poll() { local end=$((SECONDS + $1)); shift; until "$@"; do [ "$SECONDS" -lt "$end" ] || return 1; sleep 0.5; done; }
btmgmt_tty() { timeout 20 script -qc "btmgmt $*" /dev/null | tr -d '\r'; }
mgmt_lists() { local i; for i in "$@"; do btmgmt_tty --index "$i" info | grep -q "^hci$i:" || return 1; done; }
unit_state() { systemctl show -p ActiveState,SubState --value "$1" | paste -sd/; }
main_pid() { systemctl show -p MainPID --value "$1"; }

echo "DEBBOOT phase $PHASE: $(uname -r), systemd $(systemctl --version | head -1 | cut -d' ' -f2), $(bluetoothctl --version 2>/dev/null)"

# One packet per line, as hcidump -R prints them, continuation lines joined.
dump_packets() {
  awk '/^[<>] / { if (p != "") print p; p = $0; sub(/ +$/, "", p); next }
       /^  / { if (p != "") { sub(/^ +/, ""); sub(/ +$/, ""); p = p " " $0 }; next }
       END { if (p != "") print p }' "$1"
}
# hear SECS: LE discovery on hci1 through the kernel (btmgmt find -l) with hcidump -R recording
# what hci1 receives, for at most SECS seconds or until the payload is heard. Sets HEARD (the
# number of advertising reports carrying the profile's bytes) and HEARD_AFTER (seconds).
hear() {
  local dump find t0=$SECONDS out=$WORK/hcidump.$RANDOM
  stdbuf -oL hcidump -i hci1 -R >"$out" 2>&1 &
  dump=$!
  poll 10 grep -q '^device: hci1' "$out"
  btmgmt_tty --index 1 find -l >"$out.find" 2>&1 &
  find=$!
  HEARD=0
  local end=$((SECONDS + $1))
  while [ "$SECONDS" -lt "$end" ]; do
    HEARD=$(dump_packets "$out" | grep -E '^> 04 3E .. (02|0D) ' | grep -cF -- "$P_ADV")
    [ "$HEARD" -gt 0 ] && [ -z "${HEAR_FULL:-}" ] && break
    sleep 0.25
  done
  HEARD_AFTER=$((SECONDS - t0))
  kill "$find" 2>/dev/null; wait "$find" 2>/dev/null
  btmgmt_tty --index 1 stop-find -l >/dev/null 2>&1
  sleep 0.3
  kill "$dump" 2>/dev/null; wait "$dump" 2>/dev/null
  HEARD=$(dump_packets "$out" | grep -E '^> 04 3E .. (02|0D) ' | grep -cF -- "$P_ADV")
}
# Seconds the beacon's unit took from a command to being heard (HEARD_AFTER), PASS/FAIL.
check_heard() {  # NAME SECS
  hear "$2"
  if [ "$HEARD" -ge 1 ]; then pass "$1" "heard after ${HEARD_AFTER} s of discovery"; else fail "$1" "no report with $P_ADV in $2 s"; fi
}
check_silent() {  # NAME SECS
  HEAR_FULL=1 hear "$2"
  if [ "$HEARD" -eq 0 ]; then pass "$1" "nothing heard in $2 s"; else fail "$1" "$HEARD reports with the payload"; fi
}
# Nothing denied under the sandbox: no SIGSYS, no seccomp audit record, no permission error from
# our units, in this boot's journal (kernel lines included).
check_no_denials() {  # NAME [SINCE]: SINCE (journalctl --since) leaves out what came before
  local bad since=()
  [ -n "${2:-}" ] && since=(--since "$2")
  bad=$( { journalctl -b "${since[@]}" -k -o cat; journalctl -b "${since[@]}" -o cat -u 'ibeacon*'; } 2>/dev/null |
    grep -Ei 'SIGSYS|audit.*seccomp|type=1326|denied|not permitted|status=31/SYS' | grep -v 'running in system mode (' || true)
  if [ -z "$bad" ]; then pass "$1" "journal of this boot: no SIGSYS, seccomp or denied line"; else fail "$1" "$(echo "$bad" | head -5 | tr '\n' '|')"; fi
}

# The hardware: btvirt as a unit of the image's "machine", started before bluetoothd at every
# boot (the kernel's first HCI Reset to btvirt can time out under TCG: then start it again).
start_controllers() {
  local try
  for try in 1 2 3; do
    systemctl restart debboot-btvirt.service
    poll 20 eval '[ -e /sys/class/bluetooth/hci0 ] && [ -e /sys/class/bluetooth/hci1 ]'
    poll 15 mgmt_lists 0 1 && { pass "controllers hci0 and hci1 (btvirt) in the management interface" "try $try"; return 0; }
  done
  fail "controllers hci0 and hci1 (btvirt) in the management interface" "$(btmgmt_tty info | grep -c '^hci')"
  return 1
}

# The controllers, as the unit debboot-btvirt.service runs them: amd64 `btvirt -l2` (two
# controllers through hci_vhci). arm64 (Debian's arm64 kernel: CONFIG_BT_HCIVHCI is not set):
# btvirt's server, which makes one emulated controller per connection, all of them on one "air",
# and two connections to it, each a pty (socat) that btattach hands to the kernel's hci_uart
# (H4): hci0 first, then hci1. The unit fails when any of them ends (start_controllers starts it
# again).
write_controllers() {
  local exec_pre exec_start
  case $(dpkg --print-architecture) in
  amd64) exec_pre='/sbin/modprobe hci_vhci' exec_start='/usr/bin/btvirt -l2' ;;
  *)
    exec_pre='/sbin/modprobe hci_uart' exec_start=/usr/local/sbin/debboot-controllers
    cat >/usr/local/sbin/debboot-controllers <<'SH'
#!/bin/bash
set -u
wait_for() { local i; for i in $(seq 150); do [ -e "$1" ] && return 0; sleep 0.2; done; echo "no $1" >&2; return 1; }
rm -f /tmp/bt-server-*
/usr/bin/btvirt -s &
wait_for /tmp/bt-server-bredrle || exit 1
for i in 0 1; do
  rm -f "/run/debboot-bt$i"
  socat PTY,link=/run/debboot-bt$i,raw,echo=0 UNIX-CONNECT:/tmp/bt-server-bredrle &
  wait_for "/run/debboot-bt$i" || exit 1
  /usr/bin/btattach -B "/run/debboot-bt$i" -P h4 &
  wait_for "/sys/class/bluetooth/hci$i" || exit 1
done
wait -n
exit 1
SH
    chmod 0755 /usr/local/sbin/debboot-controllers ;;
  esac
  cat >/etc/systemd/system/debboot-btvirt.service <<UNIT
[Unit]
Description=two virtual controllers (btvirt): the deb-boot test's hardware
Before=bluetooth.service
[Service]
ExecStartPre=$exec_pre
ExecStart=$exec_start
[Install]
WantedBy=multi-user.target
UNIT
}

phase1() {
  write_controllers
  systemctl daemon-reload
  systemctl enable debboot-btvirt.service >/dev/null 2>&1
  start_controllers || return
  poll 30 systemctl is-active -q bluetooth  # started by udev once a controller exists
  systemctl is-active -q bluetooth && pass "bluetoothd runs" || fail "bluetoothd runs" "$(unit_state bluetooth)"

  # apt install, offline (dependencies are in the image), postinst and all.
  cp "$SHARE/$DEB" /tmp/
  if apt-get install -y -q -o Dpkg::Use-Pty=0 "/tmp/$DEB" </dev/null >"$WORK/apt.log" 2>&1; then
    pass "apt install ./$DEB" "$(grep -m1 '^ibeacon:' "$WORK/apt.log" | cut -c1-160)"
  else
    fail "apt install ./$DEB" "$(tail -5 "$WORK/apt.log" | tr '\n' '|')"
    return
  fi
  local perm
  perm="$(stat -c '%U:%G %a' /usr/bin/ibeacon) $(getcap /usr/bin/ibeacon | awk '{print $2}')"
  [ "$perm" = "root:ibeacon 750 cap_net_admin=ep" ] && pass "postinst: /usr/bin/ibeacon root:ibeacon 0750 cap_net_admin=ep" ||
    fail "postinst: /usr/bin/ibeacon root:ibeacon 0750 cap_net_admin=ep" "$perm"

  install -m 0644 /usr/share/doc/ibeacon/examples/store12.json /etc/ibeacon/store12.json
  local t0=$SECONDS
  if systemctl enable --now ibeacon@store12 >"$WORK/enable.log" 2>&1; then
    pass "systemctl enable --now ibeacon@store12" "$((SECONDS - t0)) s"
  else
    fail "systemctl enable --now ibeacon@store12" "$(tr '\n' '|' <"$WORK/enable.log") $(journalctl -b -u ibeacon@store12 -o cat | tail -5 | tr '\n' '|')"
  fi
  # Type=notify: `active (running)` only after READY=1 (before it, the unit is activating).
  [ "$(unit_state ibeacon@store12)" = active/running ] && pass "ibeacon@store12 active (running) through READY=1" ||
    fail "ibeacon@store12 active (running) through READY=1" "$(unit_state ibeacon@store12)"
  check_heard "scanner on hci1 hears the exact payload" 8

  local pid1 pid2
  pid1=$(main_pid ibeacon@store12)
  systemctl kill -s KILL ibeacon@store12
  t0=$SECONDS
  poll 30 eval '[ "$(unit_state ibeacon@store12)" = active/running ] && [ "$(main_pid ibeacon@store12)" != "$pid1" ] && [ "$(main_pid ibeacon@store12)" != 0 ]'
  pid2=$(main_pid ibeacon@store12)
  if [ "$(unit_state ibeacon@store12)" = active/running ] && [ "$pid2" != "$pid1" ]; then
    pass "kill -s KILL: restarted by systemd" "pid $pid1 -> $pid2 in $((SECONDS - t0)) s, NRestarts=$(systemctl show -p NRestarts --value ibeacon@store12)"
  else
    fail "kill -s KILL: restarted by systemd" "$(unit_state ibeacon@store12) pid $pid1 -> $pid2"
  fi
  HEAR_FULL=1 hear 6
  [ "$HEARD" -eq 1 ] && pass "after the restart: one beacon on the air" "1 report in one discovery" ||
    fail "after the restart: one beacon on the air" "$HEARD reports in one discovery (btvirt: one per advertiser)"

  systemctl stop ibeacon@store12
  [ "$(unit_state ibeacon@store12)" = inactive/dead ] && ! pgrep -x ibeacon >/dev/null &&
    pass "systemctl stop: inactive, no ibeacon process" || fail "systemctl stop: inactive, no ibeacon process" "$(unit_state ibeacon@store12) $(pgrep -ax ibeacon)"
  check_silent "after stop: silent, no instance left on hci0" 5
  systemctl start ibeacon@store12

  # Group ibeacon: alice is not in it, bob is.
  useradd -m alice && useradd -m -G ibeacon bob
  runuser -u alice -- /usr/bin/ibeacon scan --device hci1 --duration 2 >"$WORK/alice.log" 2>&1
  local rc=$?
  [ "$rc" -ne 0 ] && grep -qi 'permission denied' "$WORK/alice.log" && pass "user alice (not in group ibeacon) cannot run ibeacon" "exit $rc: $(head -1 "$WORK/alice.log")" ||
    fail "user alice (not in group ibeacon) cannot run ibeacon" "exit $rc: $(head -2 "$WORK/alice.log" | tr '\n' '|')"
  runuser -u bob -- /usr/bin/ibeacon scan --device hci1 --duration 3 --json >"$WORK/bob.log" 2>"$WORK/bob.err"
  rc=$?
  [ "$rc" -eq 0 ] && pass "user bob (group ibeacon) scans hci1 through the management socket" "exit 0, $(wc -l <"$WORK/bob.log") JSON lines" ||
    fail "user bob (group ibeacon) scans hci1 through the management socket" "exit $rc: $(head -3 "$WORK/bob.err" | tr '\n' '|')"

  # The monitor, with the shipped example as shipped, scanning hci1 (a drop-in: the box's own
  # adapter does not hear its own beacon), publishing to the mosquitto of the image.
  install -m 0644 /usr/share/doc/ibeacon/examples/store12.monitor /etc/ibeacon/store12.monitor
  mkdir -p /etc/systemd/system/ibeacon-monitor@store12.service.d
  printf '[Service]\nEnvironment=IBEACON_DEVICE=hci1\nEnvironment="IBEACON_MQTT_ARGS=--mqtt mqtt://127.0.0.1"\n' \
    >/etc/systemd/system/ibeacon-monitor@store12.service.d/test.conf
  systemctl daemon-reload
  # The subscriber runs until both kinds of message are in or 60 s after the monitor is up (under
  # TCG on a loaded host the monitor has taken 49 s from enable to its first publication).
  timeout -s KILL 300 mosquitto_sub -h 127.0.0.1 -t '#' -v >"$WORK/mqtt.log" 2>&1 &
  local sub=$!
  t0=$SECONDS
  systemctl enable --now ibeacon-monitor@store12 >"$WORK/menable.log" 2>&1
  poll 30 eval '[ "$(unit_state ibeacon-monitor@store12)" = active/running ]'
  sleep 5
  if [ "$(unit_state ibeacon-monitor@store12)" = active/running ] && [ "$(systemctl show -p NRestarts --value ibeacon-monitor@store12)" = 0 ]; then
    pass "ibeacon-monitor@store12 with the shipped store12.monitor: active (running), no restart" "$((SECONDS - t0)) s"
  else
    fail "ibeacon-monitor@store12 with the shipped store12.monitor: active (running), no restart" "$(unit_state ibeacon-monitor@store12) NRestarts=$(systemctl show -p NRestarts --value ibeacon-monitor@store12) $(journalctl -b -u ibeacon-monitor@store12 -o cat | tail -3 | tr '\n' '|')"
  fi
  poll 60 eval "grep -q 'homeassistant/.*config\\|/config ' '$WORK/mqtt.log' && grep -q '^ibeacon/[^ ]*/region/' '$WORK/mqtt.log'"
  kill "$sub" 2>/dev/null; wait "$sub" 2>/dev/null
  grep -q 'homeassistant/.*config\|/config ' "$WORK/mqtt.log" && pass "monitor: discovery published to mosquitto" "$(grep -c . "$WORK/mqtt.log") messages" ||
    fail "monitor: discovery published to mosquitto" "$(head -3 "$WORK/mqtt.log" | cut -c1-120 | tr '\n' '|')"
  grep -q '^ibeacon/[^ ]*/region/' "$WORK/mqtt.log" && pass "monitor: region state published to mosquitto" "$(grep -m1 '^ibeacon/[^ ]*/region/' "$WORK/mqtt.log" | cut -c1-100)" ||
    fail "monitor: region state published to mosquitto" "no ibeacon/…/region/ topic"
  echo "  mqtt topics: $(awk '{print $1}' "$WORK/mqtt.log" | sort -u | head -8 | tr '\n' ' ')"
  journalctl -b -u ibeacon-monitor@store12 -o cat | head -30 | cut -c1-200 | sed 's/^/  monitor journal: /'

  local unit score
  for unit in ibeacon@store12.service ibeacon-monitor@store12.service; do
    score=$(systemd-analyze security "$unit" 2>/dev/null | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
    awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.5) }' && pass "systemd-analyze security $unit <= 2.5" "$score" ||
      fail "systemd-analyze security $unit <= 2.5" "${score:-none}"
  done
  check_no_denials "phase 1: nothing denied under the sandbox"
  journalctl -b -u ibeacon@store12 -o cat | head -40 | cut -c1-200 | sed 's/^/  ibeacon@store12 journal: /'
  # For phase 2: the operator's edit to /etc/default/ibeacon must survive the upgrade.
  echo '# edited by the operator (deb-boot)' >>/etc/default/ibeacon
}

phase2() {
  # Hardware present at boot (debboot-btvirt.service, enabled in phase 1); a timed-out first
  # HCI Reset under TCG needs btvirt started again.
  poll 30 mgmt_lists 0 1 || start_controllers
  # Under TCG the kernel's first HCI Reset to btvirt often times out at boot ("hci0: Opcode
  # 0x0c03 failed: -110"); the kernel then leaves hci0 out of its management index list, the
  # beacon takes the raw HCI path, which its unit does not grant (CAP_NET_RAW), and exits 77
  # until btvirt is started again above. That is this test bed's adapter, not the unit's: the
  # denial check of this phase counts from here, and the earlier lines are shown.
  echo "  before the controllers were listed: $(journalctl -b -k -o cat | grep -c 'Opcode 0x0c03 failed') HCI Reset timeouts, $(journalctl -b -u ibeacon@store12 -o cat | grep -c 'not allowed to send') raw-HCI EPERM exits of ibeacon@store12"
  poll 60 eval '[ "$(unit_state ibeacon@store12)" = active/running ]'
  [ "$(unit_state ibeacon@store12)" = active/running ] && pass "after reboot: ibeacon@store12 active (running), nobody logged in" "$(who | wc -l) sessions" ||
    fail "after reboot: ibeacon@store12 active (running), nobody logged in" "$(unit_state ibeacon@store12)"
  check_heard "after reboot: the beacon is on the air" 8
  # The denial check counts from when both units run again on listed adapters: a start that
  # began before btvirt was restarted can still fail (raw HCI, EPERM) a moment after (seen once
  # for the monitor on hci1).
  poll 60 eval '[ "$(unit_state ibeacon-monitor@store12)" = active/running ]'
  echo "  monitor after reboot: $(unit_state ibeacon-monitor@store12), NRestarts=$(systemctl show -p NRestarts --value ibeacon-monitor@store12)"
  local ready_at
  ready_at=$(date '+%Y-%m-%d %H:%M:%S')

  systemctl restart bluetooth
  sleep 2
  check_heard "after systemctl restart bluetooth: on the air" 8
  btmgmt_tty --index 0 power off >/dev/null; btmgmt_tty --index 0 power on >/dev/null
  check_heard "after btmgmt power off/on of hci0: on the air" 8
  echo "  journal (why): $(journalctl -b -u ibeacon@store12 -o cat | tail -4 | cut -c1-140 | tr '\n' '|')"

  local pid1 pid2 mpid1 mpid2
  pid1=$(main_pid ibeacon@store12)
  mpid1=$(main_pid ibeacon-monitor@store12)
  cp "$SHARE/$DEB_UP" /tmp/
  if apt-get install -y -q -o Dpkg::Use-Pty=0 "/tmp/$DEB_UP" </dev/null >"$WORK/apt-up.log" 2>&1 &&
     [ "$(dpkg-query -W -f='${Version}' ibeacon)" = "$VERSION_UP" ]; then
    pass "apt install ./$DEB_UP (upgrade)"
  else
    fail "apt install ./$DEB_UP (upgrade)" "$(tail -4 "$WORK/apt-up.log" | tr '\n' '|')"
  fi
  poll 20 eval '[ "$(unit_state ibeacon@store12)" = active/running ]'
  pid2=$(main_pid ibeacon@store12)
  [ "$pid2" != "$pid1" ] && [ "$(unit_state ibeacon@store12)" = active/running ] &&
    pass "upgrade restarted the running beacon on the new binary" "pid $pid1 -> $pid2" || fail "upgrade restarted the running beacon on the new binary" "pid $pid1 -> $pid2 $(unit_state ibeacon@store12)"
  readlink "/proc/$pid2/exe" | grep -q deleted && fail "the beacon runs /usr/bin/ibeacon of the upgrade" "$(readlink "/proc/$pid2/exe")" ||
    pass "the beacon runs /usr/bin/ibeacon of the upgrade" "$(readlink "/proc/$pid2/exe")"
  poll 30 eval '[ "$(unit_state ibeacon-monitor@store12)" = active/running ]'
  mpid2=$(main_pid ibeacon-monitor@store12)
  [ "$mpid2" != "$mpid1" ] && [ "$(unit_state ibeacon-monitor@store12)" = active/running ] &&
    pass "upgrade restarted the running monitor" "pid $mpid1 -> $mpid2" || fail "upgrade restarted the running monitor" "pid $mpid1 -> $mpid2 $(unit_state ibeacon-monitor@store12)"
  grep -q 'edited by the operator' /etc/default/ibeacon && [ -s /etc/ibeacon/store12.json ] && [ -s /etc/ibeacon/store12.monitor ] &&
    pass "upgrade kept /etc/default/ibeacon (edited) and /etc/ibeacon" || fail "upgrade kept /etc/default/ibeacon (edited) and /etc/ibeacon"
  [ "$(stat -c '%U:%G %a' /usr/bin/ibeacon) $(getcap /usr/bin/ibeacon | awk '{print $2}')" = "root:ibeacon 750 cap_net_admin=ep" ] &&
    pass "upgrade: /usr/bin/ibeacon root:ibeacon 0750 cap_net_admin=ep again" || fail "upgrade: /usr/bin/ibeacon root:ibeacon 0750 cap_net_admin=ep again" "$(stat -c '%U:%G %a' /usr/bin/ibeacon)"
  check_heard "after the upgrade: on the air" 8
  check_no_denials "phase 2: nothing denied under the sandbox (once the controllers are listed)" "$ready_at"
  journalctl -b -u ibeacon@store12 -o short-monotonic | head -40 | cut -c1-220 | sed 's/^/  ibeacon@store12 journal: /'

  apt-get purge -y -q ibeacon </dev/null >"$WORK/purge.log" 2>&1
  local left
  left=$(ls -d /usr/bin/ibeacon /etc/ibeacon /etc/default/ibeacon /run/ibeacon /usr/lib/systemd/system/ibeacon* 2>/dev/null | tr '\n' ' ')
  [ -z "$left" ] && ! pgrep -x ibeacon >/dev/null && ! systemctl is-active -q 'ibeacon@*' 'ibeacon-monitor@*' &&
    pass "apt purge: units stopped, nothing left" || fail "apt purge: units stopped, nothing left" "left: $left $(pgrep -ax ibeacon)"
  check_silent "after purge: silent" 5
}

if [ "$PHASE" = 1 ]; then phase1; echo 2 >"$STATE/phase"; else phase2; fi
echo "DEBBOOT phase $PHASE: $passed passed, $failed failed"
[ "$failed" -eq 0 ] || echo "$PHASE" >>"$STATE/failed-phases"
sync
if [ "$PHASE" = 1 ]; then echo "DEBBOOT REBOOT"; systemctl reboot; else echo "DEBBOOT DONE"; systemctl poweroff; fi
exit 0
}
