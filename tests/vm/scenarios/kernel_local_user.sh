# shellcheck shell=bash
# Scenario kernel_local_user: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Issue 30, items 4 and 5: a local user with the installed (setcap'd) binary.
# (4) /proc mounted hidepid=2 (what ProtectProc=invisible gives a unit): the user's `stop` cannot
#     read /proc/PID of root's running advertiser (ENOENT, as for a process that is gone) and must
#     not remove its instance. (5) the user puts a spoofed beacon on the air through the setcap'd
#     binary and SIGKILLs it and its guardian: root's `stop` must leave nothing on the air — the
#     binary refuses to advertise where it cannot record its instances for `stop`, and records
#     them (so `stop` removes them) where root gave the user a directory.
scenario_kernel_local_user() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  if ! id "$TEST_USER" >/dev/null 2>&1; then
    useradd --no-create-home --shell /bin/sh "$TEST_USER" || { fail "useradd" "user $TEST_USER" "useradd failed"; return; }
  fi
  local uid gid capdir=/usr/local/lib/ibeacon-test out=$WORK/local-user.txt adv spoof pids
  uid=$(id -u "$TEST_USER"); gid=$(id -g "$TEST_USER")
  mkdir -p "$capdir"
  install -m 0755 "$IBEACON_BIN" "$capdir/ibeacon-admin"
  setcap cap_net_admin+ep "$capdir/ibeacon-admin"
  install -m 0644 "$PROFILE" "$WORK/spoof.json"
  as_user() { setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"; }
  # (4) root advertises; /proc hides it from the user; the user's stop leaves it alone.
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/local-adv.txt" 2>&1 &
  adv=$!
  BG_PIDS+=("$adv")
  poll 30 grep -q "through the kernel" "$WORK/local-adv.txt"
  mount -o remount,hidepid=2 /proc
  check_eq "(4) /proc/$adv hidden from $TEST_USER (hidepid=2)" "hidden" "$(as_user cat /proc/$adv/stat > /dev/null 2>&1 && echo visible || echo hidden)"
  as_user "$capdir/ibeacon-admin" stop --device hci0 > "$out" 2>&1
  local status=$?
  mount -o remount,hidepid=0 /proc
  check_status "(4) the user's stop with /proc hidepid=2" 0 "$status" "$out"
  if grep -q "removed ibeacon's advertising instance" "$out"; then
    fail "(4) root's running advertiser's instance is not removed" "nothing removed" "$(tr '\n' ' ' < "$out")"
  else
    pass "(4) root's running advertiser's instance is not removed" "$(grep -o 'process [0-9]*, which wrote[^:]*' "$out" | head -1)"
  fi
  kernel_observe 4
  check_eq "(4) root's beacon still heard on hci1" "yes" "$([ "$(count_reports_with "$P_ADV")" -gt 0 ] && echo yes || echo no)"
  stop_advertiser "$adv" "$WORK/local-adv.txt"
  # (5) the user's spoofed beacon, SIGKILLed with its guardian, then root's stop (no directory of
  # the user's below /run/ibeacon: kernel_capabilities makes one and leaves it).
  rm -rf "/run/ibeacon/$TEST_USER"
  as_user "$capdir/ibeacon-admin" advertise --device hci0 --profile "$WORK/spoof.json" > "$WORK/spoof.txt" 2>&1 &
  spoof=$!
  BG_PIDS+=("$spoof")
  poll 30 eval 'grep -q "through the kernel" "$WORK/spoof.txt" || ! kill -0 $spoof 2>/dev/null'
  pids=$(pgrep -u "$uid" -f ibeacon-admin | tr '\n' ' ')
  [ -n "$pids" ] && kill -KILL $pids
  wait "$spoof" 2>/dev/null; bg_forget "$spoof"
  echo "    spoofing advertiser: $(head -3 "$WORK/spoof.txt" | tr '\n' ' ' | cut -c1-300)"
  ib stop --device hci0 > "$out" 2>&1
  check_status "(5) root's stop after the user's SIGKILL" 0 $? "$out"
  sed 's/^/        stop: /' "$out"
  kernel_observe 4
  check_eq "(5) no spoofed beacon left on the air" "0" "$(count_reports_with "$P_ADV")"
  # (5) with a directory root gave the user: allowed, recorded, removed by root's stop.
  install -d -m 0755 -o "$uid" -g "$gid" "/run/ibeacon/$TEST_USER"
  as_user "$capdir/ibeacon-admin" advertise --device hci0 --profile "$WORK/spoof.json" > "$WORK/spoof2.txt" 2>&1 &
  spoof=$!
  BG_PIDS+=("$spoof")
  poll 30 grep -q "through the kernel" "$WORK/spoof2.txt"
  check_contains "(5) with a directory of its own the user may advertise" "through the kernel" "$WORK/spoof2.txt"
  pids=$(pgrep -u "$uid" -f ibeacon-admin | tr '\n' ' ')
  [ -n "$pids" ] && kill -KILL $pids
  wait "$spoof" 2>/dev/null; bg_forget "$spoof"
  # Issue 40, hole 3: a record in a user's directory names whatever that user (or a monitor's
  # hook) wrote; root's stop leaves it alone, the user's own stop (a unit's ExecStopPost) acts.
  ib stop --device hci0 > "$out" 2>&1
  check_contains "(5) root's stop leaves the user's record alone" "belongs to uid $uid, not to this user" "$out"
  as_user "$capdir/ibeacon-admin" stop --device hci0 > "$out" 2>&1
  check_contains "(5) the user's own stop removes its killed advertiser's instance" "removed ibeacon's advertising instance(s)" "$out"
  rm -rf "/run/ibeacon/$TEST_USER"
  # (6) Issue 40, hole 4: an adapter root powered off is not powered on for the user (raw:hci0
  # through the setcap'd binary, which used to bring it up and then fail with 77).
  timeout 10 hciconfig hci0 down
  as_user "$capdir/ibeacon-admin" info --device raw:hci0 > "$out" 2>&1
  check_status "(6) the user's raw:hci0 on a powered-off adapter" 77 $? "$out"
  check_contains "(6) it says why" "does not power on an adapter" "$out"
  check_eq "(6) hci0 still down" "DOWN" "$(timeout 10 hciconfig hci0 | awk '/RUNNING|DOWN/ { print $1; exit }')"
  timeout 10 hciconfig hci0 up
  bluetoothd_stop
}
