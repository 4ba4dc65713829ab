# shellcheck shell=bash
# Scenario kernel_coexist: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# 1. Another program's advertisement and ibeacon's on the adapter bluetoothd manages: both are
#    heard on hci1 while ibeacon advertises, ibeacon takes a free instance number (never the
#    other's), and after ibeacon exits on SIGTERM the other's instance and advertisement are still
#    there and the iBeacon is gone. The same run for two other programs (coexist_with OTHER):
#      btmgmt        btmgmt add-adv, through the management interface as bluetoothd's clients get
#      bluetoothctl  bluetoothctl's `advertise on`: D-Bus LEAdvertisingManager1, bluetoothd adds
#                    the kernel instance and removes it when bluetoothctl goes
scenario_kernel_coexist() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  pass "bluetoothd running, hci0 and hci1 powered"
  ib devices > "$WORK/coexist-devices.txt" 2>&1
  check_eq "ibeacon devices: hci0 goes through the kernel" "hci0 mgmt" "$(awk '$1 == "hci0" { print $1, $NF }' "$WORK/coexist-devices.txt")"
  coexist_with btmgmt
  coexist_with bluetoothctl
  bluetoothd_stop
}

coexist_with() {  # coexist_with btmgmt|bluetoothctl
  local other=$1 log=$WORK/coexist-$1-adv.txt adv t0
  coexist_other_start "$other"
  t0=$EPOCHREALTIME
  "$IBEACON_BIN" advertise ${IBEACON_VM_VERBOSE:-} --device hci0 --profile "$PROFILE" > "$log" 2>&1 &
  adv=$!
  BG_PIDS+=("$adv")
  if poll 30 grep -q "through the kernel" "$log"; then
    pass "beside $other: advertise on hci0 goes through the kernel" "$(head -1 "$log" | cut -c1-110); ready after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f ms", (b - a) * 1000 }')"
  else
    fail "beside $other: advertise on hci0 goes through the kernel" "a status line" "$(tr '\n' ' ' < "$log")"
  fi
  check_eq "kernel instances: $other's and ibeacon's" "2" "$(mgmt_instances 0)"
  check_contains "beside $other: ibeacon took a free instance number (2), not the other's" "(instance 2)" "$log"
  on_air "iBeacon and $other's advertisement both heard on hci1" 6 "iBeacon=$P_ADV=yes" "$other=$COEXIST_OTHER_ADV=yes"
  stop_advertiser "$adv" "$log"
  check_eq "after ibeacon exits: $other's instance only" "1" "$(mgmt_instances 0)"
  on_air "after exit: $other's advertisement still heard, the iBeacon no longer" 4 "$other=$COEXIST_OTHER_ADV=yes" "iBeacon=$P_ADV=no"
  coexist_other_stop "$other"
}

# The other program's advertisement on hci0, and the bytes it is heard by (COEXIST_OTHER_ADV).
BTCTL_ADV="FF FF CA FE 03 04"   # bluetoothctl's manufacturer data 0xFFFF: CA FE 03 04
coexist_other_start() {
  case $1 in
  btmgmt)
    COEXIST_OTHER_ADV=$OTHER_ADV
    btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 1 > "$WORK/addadv.txt" 2>&1
    check_eq "btmgmt add-adv instance 1 (another program): 1 instance" "1" "$(mgmt_instances 0)"
    ;;
  bluetoothctl)
    # bluetoothctl reads its commands from a terminal: script(1) gives it one, fed from a FIFO
    # kept open on fd 7.
    COEXIST_OTHER_ADV=$BTCTL_ADV
    local fifo=$WORK/btctl.in
    rm -f "$fifo"; mkfifo "$fifo"
    script -qfc "bluetoothctl" /dev/null < "$fifo" > "$WORK/btctl.out" 2>&1 &
    COEXIST_BTCTL=$!
    BG_PIDS+=("$COEXIST_BTCTL")
    exec 7> "$fifo"
    sleep 1
    # btvirt's hci0 is 00:AA:01:00:00:00 (bluetoothctl's default is the first adapter it met).
    printf 'select 00:AA:01:00:00:00\nmenu advertise\nmanufacturer 0xffff 0xca 0xfe 0x03 0x04\nback\nadvertise on\n' >&7
    if poll 20 grep -q "Advertising object registered" "$WORK/btctl.out"; then
      pass "bluetoothctl advertise on (another program, through bluetoothd)" "$(mgmt_instances 0) instance(s)"
    else
      fail "bluetoothctl advertise on (another program, through bluetoothd)" "Advertising object registered" "$(tr -d '\r' < "$WORK/btctl.out" | tail -5 | tr '\n' ' ')"
    fi
    ;;
  esac
}

coexist_other_stop() {
  case $1 in
  btmgmt) btmgmt_tty --index 0 rm-adv 1 > /dev/null 2>&1 ;;
  bluetoothctl)
    printf 'advertise off\nquit\n' >&7
    exec 7>&-
    poll 10 dead "$COEXIST_BTCTL" || kill "$COEXIST_BTCTL" 2>/dev/null
    wait "$COEXIST_BTCTL" 2>/dev/null; bg_forget "$COEXIST_BTCTL"
    ;;
  esac
}
