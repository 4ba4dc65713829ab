# shellcheck shell=bash
# Scenario ibeacon_btmon_capture: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# btmon records both controllers (datalink 2001, the controller index in the flags) while
# ibeacon advertises on hci0 and scans on hci1; then the recording is read back with
# `scan --device btsnoop:FILE`: by default the controller with reports (hci1), `--index` picks,
# and tshark counts the same reports for hci1.
scenario_ibeacon_btmon_capture() {
  need_bin || return
  need_profile || return
  command -v btmon >/dev/null || { fail "btmon installed" "btmon on PATH" "missing"; return; }
  local cap=$WORK/two-controllers.btsnoop
  reset_controller hci0
  reset_controller hci1
  btmon -w "$cap" > "$WORK/btmon.txt" 2>&1 &
  local mon=$!
  BG_PIDS+=("$mon")
  sleep 1
  "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/btmon-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  sleep 2
  ib scan --device hci1 --json --duration 5 > "$WORK/btmon-live.jsonl" 2>"$WORK/btmon-live.err"
  check_status "scan on hci1 while btmon records" 0 $? "$WORK/btmon-live.err"
  stop_advertiser "$adv" "$WORK/btmon-adv.txt"
  stop_pid "$mon"
  bg_forget "$mon"
  local datalink
  datalink=$(od -An -tu1 -j12 -N4 "$cap" 2>/dev/null | tr -s ' ' | sed 's/^ //')
  check_eq "btmon wrote datalink 2001 (Linux monitor)" "0 0 7 209" "$datalink"
  local on0 on1
  on0=$(tshark -r "$cap" -Y "hci_mon.adapter_id == 0" 2>/dev/null | wc -l)
  on1=$(tshark -r "$cap" -Y "hci_mon.adapter_id == 1" 2>/dev/null | wc -l)
  if [ "$on0" -gt 0 ] && [ "$on1" -gt 0 ]; then
    pass "the capture holds both controllers" "hci0 $on0 records, hci1 $on1"
  else
    fail "the capture holds both controllers" "records of hci0 and hci1" "hci0 $on0, hci1 $on1"
  fi
  ib scan --device "btsnoop:$cap" --json --reports --all > "$WORK/cap-default.jsonl" 2>"$WORK/cap-default.err"
  check_status "scan --device btsnoop:FILE of the btmon file" 0 $? "$WORK/cap-default.err"
  check_eq "the recorded reports hold the beacon" match "$(scan_saw_profile "$WORK/cap-default.jsonl")"
  ib scan --device "btsnoop:$cap" --json --reports --all --index 1 > "$WORK/cap-1.jsonl" 2>"$WORK/cap-1.err"
  check_status "--index 1" 0 $? "$WORK/cap-1.err"
  check_eq "default = --index 1 (the controller with reports)" "$(md5sum < "$WORK/cap-default.jsonl")" \
    "$(md5sum < "$WORK/cap-1.jsonl")"
  ib scan --device "btsnoop:$cap" --json --reports --all --index 0 > "$WORK/cap-0.jsonl" 2>"$WORK/cap-0.err"
  check_status "--index 0" 0 $? "$WORK/cap-0.err"
  check_eq "--index 0: the advertiser received no reports" 0 "$(wc -l < "$WORK/cap-0.jsonl")"
  local theirs
  theirs=$(tshark -r "$cap" -Y "hci_mon.adapter_id == 1 && (bthci_evt.le_meta_subevent == 0x02 || bthci_evt.le_meta_subevent == 0x0d)" \
    -T fields -e bthci_evt.bd_addr -E occurrence=a 2>/dev/null | tr ',' '\n' | grep -c .)
  check_eq "tshark counts the same reports on hci1" "$theirs" "$(wc -l < "$WORK/cap-1.jsonl" | tr -d ' ')"
}

# The advertiser address of every report hci1 heard carrying DATA, one "ADDRESS TYPE PDU" line per
# distinct value: TYPE public/random, PDU the legacy event type (00 ADV_IND, 03 ADV_NONCONN_IND) or
# the extended Event_Type (0013 legacy ADV_IND, 0010 legacy ADV_NONCONN_IND). One report per event
# (Num_Reports 1: what the kernel's scan gets from btvirt) — read field by field, Core 5.4 Vol 4
# Part E §7.7.65.2 / §7.7.65.13.
report_addresses() {
  reports_with "$1" | awk '{
      if ($5 == "02") { pdu = $7; type = $8; a = 9 } else { pdu = $8 $7; type = $9; a = 10 }
      addr = $(a+5) ":" $(a+4) ":" $(a+3) ":" $(a+2) ":" $(a+1) ":" $a
      print addr, (type == "00" ? "public" : "random"), pdu
    }' | sort -u
}
