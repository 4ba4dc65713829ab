# shellcheck shell=bash
# Scenario kernel_stop_records: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_kernel_stop_records() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  if ! id "$TEST_USER" >/dev/null 2>&1; then
    useradd --no-create-home --shell /bin/sh "$TEST_USER" || { fail "useradd" "user $TEST_USER" "useradd failed"; return; }
  fi
  local uid gid capdir=/usr/local/lib/ibeacon-test evil boot out=$WORK/stop-records.txt adv rec
  uid=$(id -u "$TEST_USER"); gid=$(id -g "$TEST_USER")
  mkdir -p "$capdir"
  install -m 0755 "$IBEACON_BIN" "$capdir/ibeacon-admin"
  setcap cap_net_admin+ep "$capdir/ibeacon-admin" 2>"$WORK/setcap.err"
  check_status "setcap cap_net_admin+ep on a copy (as make install)" 0 $? "$WORK/setcap.err"
  btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 1 > /dev/null 2>&1
  boot=$(cat /proc/sys/kernel/random/boot_id)
  evil=$(mktemp -d /tmp/evil.XXXXXX)
  chown "$uid:$gid" "$evil"
  # As ibeacon would write them, for a process that is gone, and in the older format.
  runuser -u "$TEST_USER" -- sh -c "printf 'pid 3999999\nstart 1\nboot $boot\naddress 00:AA:01:00:00:00\ninstance 1\ninstance 2\n' > $evil/hci0-3999999.instances; printf 'instance 1\ninstance 2\ninstance 3\n' > $evil/hci0-3999998.instances"
  # (a) the other user runs the installed stop with their directory
  setpriv --reuid="$uid" --regid="$gid" --clear-groups env IBEACON_RUNTIME_DIR="$evil" \
    "$capdir/ibeacon-admin" stop --device hci0 > "$out" 2>&1
  check_status "(a) $TEST_USER's stop through the installed binary" 0 $? "$out"
  check_contains "(a) IBEACON_RUNTIME_DIR is ignored (AT_SECURE)" "IBEACON_RUNTIME_DIR is ignored" "$out"
  check_contains "(a) nothing removed" "no advertising instance of ibeacon's" "$out"
  stop_heard "(a) the other program's instance survives a forged record"
  # (b) root pointed at the forged records
  IBEACON_RUNTIME_DIR="$evil" ib stop --device hci0 > "$out" 2>&1
  check_status "(b) root's stop with IBEACON_RUNTIME_DIR=$TEST_USER's directory" 0 $? "$out"
  check_contains "(b) the directory is not believed" "belongs to uid $uid, neither root nor uid 0" "$out"
  stop_heard "(b) the other program's instance survives root's stop"
  # (c) a killed advertiser's record after a power cycle gave its number to the other program
  btmgmt_tty --index 0 rm-adv 1 > /dev/null 2>&1
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/stop-adv.txt" 2>&1 &
  adv=$!
  BG_PIDS+=("$adv")
  poll 30 grep -q "through the kernel" "$WORK/stop-adv.txt"
  check_contains "(c) the advertiser holds instance 1" "(instance 1)" "$WORK/stop-adv.txt"
  rec=$(ls /run/ibeacon/hci0-"$adv".instances 2>/dev/null)
  check_eq "(c) its record" "/run/ibeacon/hci0-$adv.instances" "$rec"
  echo "    record: $(tr '\n' ' ' < "$rec" 2>/dev/null)"
  local t0
  t0=$EPOCHREALTIME
  kill -KILL "$adv"; wait "$adv" 2>/dev/null; bg_forget "$adv"
  # Its guardian removes the instance and spends the record at once (polled every 0.2 s; the
  # debug build under TCG takes a while to open the management socket).
  poll 10 eval '[ ! -e "$rec" ]'
  echo "    the record was gone $("$PY" -c "print(f'{$EPOCHREALTIME - $t0:.2f}')") s after the SIGKILL"
  check_eq "(c) the guardian spent the record" "gone" "$([ -e "$rec" ] && echo present || echo gone)"
  check_contains "(c) the guardian says what it removed" "ended without cleaning up: removed ibeacon's advertising instance(s) 1 on hci0" "$WORK/stop-adv.txt"
  btmgmt_tty --index 0 power off > /dev/null
  btmgmt_tty --index 0 power on > /dev/null
  echo "    after the power cycle: $(mgmt_instances 0) instance(s) listed"
  btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 1 > /dev/null 2>&1
  ib stop --device hci0 > "$out" 2>&1
  check_status "(c) stop after the power cycle" 0 $? "$out"
  sed 's/^/        stop: /' "$out"
  stop_heard "(c) the other program's instance 1 survives the stale record"
  # (d) without a power cycle, a killed advertiser's instance is removed, the other's kept
  btmgmt_tty --index 0 rm-adv 1 > /dev/null 2>&1
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/stop-adv2.txt" 2>&1 &
  adv=$!
  BG_PIDS+=("$adv")
  poll 30 grep -q "through the kernel" "$WORK/stop-adv2.txt"
  btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 2 > /dev/null 2>&1
  kill_with_guardian "$adv"
  ib stop --device hci0 > "$out" 2>&1
  check_status "(d) stop after SIGKILL (advertiser and guardian)" 0 $? "$out"
  check_contains "(d) the killed advertiser's instance removed" "removed ibeacon's advertising instance(s) 1 on hci0" "$out"
  check_contains "(d) the other program's left alone" "instance(s) 2 left alone" "$out"
  stop_heard "(d) after stop: the other program's heard, ibeacon's not"
  btmgmt_tty --index 0 rm-adv 2 > /dev/null 2>&1
  rm -rf "$evil"
  bluetoothd_stop
}
