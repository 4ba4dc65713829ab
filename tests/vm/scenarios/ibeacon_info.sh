# shellcheck shell=bash
# Scenario ibeacon_info: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_ibeacon_info() {
  need_bin || return
  ib info --device hci0 > "$WORK/info.txt" 2>&1
  check_status "ibeacon info --device hci0" 0 $? "$WORK/info.txt"
  check_contains "info shows hci0's address" "$HCI0_ADDR" "$WORK/info.txt"
  check_contains "info says which path it used" "path:" "$WORK/info.txt"
  ib info --device raw:hci0 > "$WORK/info-raw.txt" 2>&1
  check_status "ibeacon info --device raw:hci0" 0 $? "$WORK/info-raw.txt"
  check_contains "raw info shows the LE features" "extended advertising" "$WORK/info-raw.txt"
}
