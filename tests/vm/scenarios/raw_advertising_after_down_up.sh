# shellcheck shell=bash
# Scenario raw_advertising_after_down_up: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# btvirt after an adapter down/up: does advertising set up again afterwards reach hci1?
scenario_raw_advertising_after_down_up() {
  local data="02 01 06 1A FF 4C 00 02 15 01 12 23 34 45 56 67 78 89 9A AB BC CD DE EF F0 01 02 03 04 C5"
  reset_controller hci0
  raw_advertise "$data" || { fail "advertise on hci0" "status 00" "status $HCI_STATUS"; return; }
  observer_start_or_fail || return
  if observer_wait "$data" 10; then pass "seen before down/up"; else fail "seen before down/up" "report" "$(observer_seen)"; fi
  observer_stop
  timeout 10 hciconfig hci0 down; sleep 1; timeout 10 hciconfig hci0 up
  raw_advertise "$data" || { fail "advertise on hci0 after down/up" "status 00" "status $HCI_STATUS"; return; }
  observer_start_or_fail || return
  if observer_wait "$data" 10; then pass "raw advertising set up again after down/up is seen"; else fail "raw advertising set up again after down/up is seen" "report" "$(observer_seen)"; fi
  observer_stop
  raw_advertise_stop
}
