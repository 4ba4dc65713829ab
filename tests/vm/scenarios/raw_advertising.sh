# shellcheck shell=bash
# Scenario raw_advertising: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Legacy advertising set up by hand with hcitool on hci0, observed on hci1 with hcidump -R.
scenario_raw_advertising() {
  # Flags | Manufacturer Specific (Apple 0x004C) | iBeacon 02 15 | UUID | major 0x0102 | minor 0x0304 | -59 dBm
  local data="02 01 06 1A FF 4C 00 02 15 01 12 23 34 45 56 67 78 89 9A AB BC CD DE EF F0 01 02 03 04 C5"
  reset_controller hci0 || { fail "reset hci0" "hciconfig hci0 down/up ok" "failed"; return; }
  observer_start_or_fail || return
  pass "scan on hci1" "LE Set Scan Parameters + Enable: status 00"
  if raw_advertise "$data"; then
    pass "advertise on hci0" "LE Set Advertising Parameters/Data/Enable: status 00"
  else
    fail "advertise on hci0" "status 00" "status $HCI_STATUS"
  fi
  if ! observer_wait "$data" 10; then
    fail "hci1 reports the iBeacon bytes" "an LE Advertising Report containing $data" "$(observer_seen)"
    return
  fi
  # Parse the report: 04 3E len | 02 subevent | 01 reports | type | addr type | addr (6, LSB first) | len | data | RSSI
  local pkt f
  pkt=$(reports_with "$data" | head -1)
  read -r -a f <<< "${pkt#> }"
  pass "hci1 reports the iBeacon bytes" "${#f[@]} bytes"
  check_eq "report: subevent, count" "02 01" "${f[3]} ${f[4]}"
  check_eq "report: event type (03 = ADV_NONCONN_IND)" "03" "${f[5]}"
  check_eq "report: advertiser address (LSB first)" "00 00 00 01 AA 00" "${f[*]:7:6}"
  check_eq "report: data length" "1E" "${f[13]}"
  check_eq "report: data" "$data" "${f[*]:14:30}"
  check_eq "report: RSSI (7F = not available in btvirt)" "7F" "${f[44]:-none}"
  # Baselines for the "stopped advertising" checks later on: a re-enabled scan hears a running
  # advertisement again, and does not once advertising is disabled.
  observer_rescan
  if observer_wait "$data" 5 2; then
    pass "rescan while advertising reports again" "$(count_reports_with "$data") reports"
  else
    fail "rescan while advertising reports again" "2 reports" "$(count_reports_with "$data")"
  fi
  raw_advertise_stop
  observer_rescan
  sleep 2
  check_eq "rescan after advertising disabled: no new report" 2 "$(count_reports_with "$data")"
  # ... and a power cycle (HCI Reset) ends advertising too, so the adapter-reset scenario's
  # "seen again" can only come from advertising re-enabled after the reset.
  if hci_cmd hci0 0x08 0x000A 01 && observer_wait "$data" 5 3; then
    pass "advertising re-enabled: reported again" "3 reports"
  else
    fail "advertising re-enabled: reported again" "3 reports (enable status 00)" "$(count_reports_with "$data") (status $HCI_STATUS)"
  fi
  reset_controller hci0
  observer_rescan
  sleep 2
  check_eq "rescan after hciconfig hci0 down/up: no new report" 3 "$(count_reports_with "$data")"
  observer_stop
}
