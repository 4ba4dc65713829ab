# shellcheck shell=bash
# Scenario ibeacon_foreign_disable: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Raw HCI (--device raw:hci0; through the kernel, a raw command behind its back is not seen).
# Another program on the shared raw HCI channel (here hcitool, as bluetoothd could) turns the
# advertising off: its Command Complete reaches ibeacon's socket too, and ibeacon takes the
# advertising back, saying why.
scenario_ibeacon_foreign_disable() {
  need_bin || return
  need_profile || return
  reset_controller hci0
  "$IBEACON_BIN" advertise --device raw:hci0 --profile "$PROFILE" > "$WORK/foreign-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if ! poll 30 grep -q "advertising" "$WORK/foreign-adv.txt"; then
    fail "advertiser started" "a status line" "$(tr '\n' ' ' < "$WORK/foreign-adv.txt")"
    stop_pid "$adv" 15
    return
  fi
  local what
  if grep -q "extended" "$WORK/foreign-adv.txt"; then
    what="LE Set Extended Advertising Enable (disable all sets)"
    hci_cmd hci0 0x08 0x0039 00 00
  else
    what="LE Set Advertising Enable (off)"
    hci_cmd hci0 0x08 0x000A 00
  fi
  check_eq "hcitool: $what" 00 "$HCI_STATUS"
  if poll 10 grep -q "advertising resumed" "$WORK/foreign-adv.txt"; then
    pass "advertiser took the advertising back" "$(grep -m1 "another program" "$WORK/foreign-adv.txt" | cut -c1-120)"
  else
    fail "advertiser took the advertising back" "\"advertising resumed\" in its log" "$(tr '\n' ' ' < "$WORK/foreign-adv.txt")"
  fi
  check_contains "advertiser named the cause" "another program changed the advertising" "$WORK/foreign-adv.txt"
  reset_controller hci1
  ib scan --device hci1 --json --duration 5 > "$WORK/foreign-scan.jsonl" 2>"$WORK/foreign-scan.err"
  check_eq "beacon heard on hci1 afterwards" match "$(scan_saw_profile "$WORK/foreign-scan.jsonl")"
  stop_advertiser "$adv" "$WORK/foreign-adv.txt"
}
