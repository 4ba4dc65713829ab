# shellcheck shell=bash
# Scenario kernel_recovery: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# 3. The adapter power-cycled through the kernel, bluetoothd restarted (it clears every
#    advertising instance when it starts), and an HCI reset: the beacon is back within 2 s of the
#    adapter, and the log names the cause.
scenario_kernel_recovery() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/recovery-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  poll 30 grep -q "through the kernel" "$WORK/recovery-adv.txt" || { fail "advertiser started" "a status line" "$(tr '\n' ' ' < "$WORK/recovery-adv.txt")"; stop_pid "$adv" 5; return; }
  local n t0 ms
  # (a) power off / on through the kernel
  btmgmt_tty --index 0 power off > /dev/null
  poll 5 grep -q "powered off" "$WORK/recovery-adv.txt"
  check_contains "power off is logged" "was powered off" "$WORK/recovery-adv.txt"
  t0=$EPOCHREALTIME
  btmgmt_tty --index 0 power on > /dev/null
  kernel_observe 2
  n=$(count_reports_with "$P_ADV")
  if [ "$n" -gt 0 ]; then pass "heard within 2 s of power on" "$n reports"; else fail "heard within 2 s of power on" "reports" "$(observer_seen)"; fi
  check_contains "power on is logged with its cause" "powered on again" "$WORK/recovery-adv.txt"
  # (b) bluetoothd restarted (killed and started again, as systemctl restart does). bluetoothd
  #     5.66 leaves a powered adapter's instances alone when it starts: ours must still be there.
  bluetoothd_stop
  /usr/libexec/bluetooth/bluetoothd -n > "$WORK/bluetoothd2.log" 2>&1 &
  BLUETOOTHD_PID=$!
  BG_PIDS+=("$BLUETOOTHD_PID")
  poll 10 eval 'script -qc "bluetoothctl show" /dev/null | grep -q "Powered: yes"'
  sleep 1
  check_eq "bluetoothd restarted: ibeacon's instance still registered" "1" "$(mgmt_instances 0)"
  kernel_observe 2
  n=$(count_reports_with "$P_ADV")
  if [ "$n" -gt 0 ]; then pass "heard within 2 s after bluetoothd restart" "$n reports; log: $(tail -1 "$WORK/recovery-adv.txt" | sed 's/.*\] //' | cut -c1-100)"; else fail "heard within 2 s after bluetoothd restart" "reports" "$(observer_seen); instances: $(mgmt_instances 0)"; fi
  # (c) HCI reset by ioctl (hciconfig reset)
  local before
  before=$(grep -c "put back\|registered again" "$WORK/recovery-adv.txt")
  timeout 10 hciconfig hci0 reset
  poll 5 eval '[ "$(grep -c "put back\|registered again" "$WORK/recovery-adv.txt")" -gt "$before" ]'
  check_contains "reset: the log names the cause" "as instance 1 (cause: hci0 was powered on again" "$WORK/recovery-adv.txt"
  kernel_observe 2
  n=$(count_reports_with "$P_ADV")
  if [ "$n" -gt 0 ]; then pass "heard within 2 s of hciconfig hci0 reset" "$n reports"; else fail "heard within 2 s of hciconfig hci0 reset" "reports" "$(observer_seen); log: $(tail -3 "$WORK/recovery-adv.txt" | tr '\n' ' ')"; fi
  stop_advertiser "$adv" "$WORK/recovery-adv.txt"
  sed 's/^/        advertiser: /' "$WORK/recovery-adv.txt" | grep -v '^        advertiser: advertising' | head -20
  bluetoothd_stop
}
