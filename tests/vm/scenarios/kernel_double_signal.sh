# shellcheck shell=bash
# Scenario kernel_double_signal: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Issue 29: one stop request, however many copies of its signal. The advertiser in a process
# group of its own (setsid) next to bluetoothd gets SIGTERM twice, as `timeout` (the child, then
# its group) or a shell trap passing a group kill on deliver it: exit 0, no "again", and the
# kernel's advertising instance removed. (The guardian, in a process group of its own, is not
# signalled; it would remove the instance after a forced exit too, so the exit status and the
# log are what tell the cleanup finished.) Then the same under `timeout` itself.
scenario_kernel_double_signal() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  local log=$WORK/double-adv.txt
  setsid "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$log" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if poll 30 grep -q "through the kernel" "$log"; then pass "advertise (own process group) goes through the kernel"
  else fail "advertise (own process group) goes through the kernel" "a status line" "$(tr '\n' ' ' < "$log")"; fi
  check_eq "its process group is its own" "$adv" "$(ps -o pgid= -p "$adv" | tr -d ' ')"
  check_eq "kernel instances while advertising" "1" "$(mgmt_instances 0)"
  kill -TERM -- "-$adv"; kill -TERM -- "-$adv"
  poll 10 dead "$adv" || kill -KILL "$adv"; wait "$adv" 2>/dev/null
  check_status "SIGTERM twice to its process group: exit 0" 0 $? "$log"
  bg_forget "$adv"
  if grep -q "again" "$log"; then fail "the cleanup was not abandoned" "no 'again'" "$(tr '\n' ' ' < "$log")"
  else pass "the cleanup was not abandoned"; fi
  check_eq "no kernel instance left" "0" "$(mgmt_instances 0)"

  log=$WORK/double-timeout.txt
  setsid timeout --preserve-status -s TERM 120 "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$log" 2>&1 &
  local t=$!
  BG_PIDS+=("$t")
  if poll 30 grep -q "through the kernel" "$log"; then pass "advertise under timeout goes through the kernel"
  else fail "advertise under timeout goes through the kernel" "a status line" "$(tr '\n' ' ' < "$log")"; fi
  check_eq "kernel instances under timeout" "1" "$(mgmt_instances 0)"
  kill -TERM "$t"   # timeout passes it to ibeacon, then to its whole group
  poll 10 dead "$t" || kill -KILL "$t"; wait "$t" 2>/dev/null
  check_status "SIGTERM to timeout (ibeacon gets it twice): exit 0" 0 $? "$log"
  bg_forget "$t"
  if grep -q "again" "$log"; then fail "the cleanup under timeout was not abandoned" "no 'again'" "$(tr '\n' ' ' < "$log")"
  else pass "the cleanup under timeout was not abandoned"; fi
  check_eq "no kernel instance left after timeout" "0" "$(mgmt_instances 0)"
  bluetoothd_stop
}
