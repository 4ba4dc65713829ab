# shellcheck shell=bash
# Scenario kernel_hidden_instances: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Issue 30, items 2 and 3. The 6.1 kernel's Read Advertising Features leaves out every instance
# whose number exceeds the count of instances (net/bluetooth/mgmt.c, read_adv_features: listed
# only if `instance <= hdev->adv_instance_cnt`): instance 3 beside one other, or 2 alone, is on the
# air but in no list. Any program that took a number while a lower one was held, and then saw that
# one removed, holds a hidden instance. (2) A killed advertiser's hidden instance is removed by its
# guardian, and with the guardian killed too by `stop`. (3) Another program's hidden instance 2 is
# neither overwritten by an advertiser of two profiles nor removed when it exits. The verdicts:
# what hci1 hears, and whether the kernel still has an instance (btmgmt rm-adv N: "Instance
# removed" or Invalid Parameters).
scenario_kernel_hidden_instances() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  local second=$WORK/hidden-second.json second_adv a b out=$WORK/hidden-stop.txt log=$WORK/hidden-guarded.txt
  second_adv=$(second_profile "$second")
  # btvirt has 3 advertising sets, and at power-on the 6.1 kernel sets one up for instance 0
  # (hci_sync.c, hci_powered_update_adv_sync: `HCI_ADVERTISING || list_empty(adv_instances)`),
  # which only Remove Advertising of all instances (LE Clear Advertising Sets) frees.
  btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 1 > /dev/null 2>&1
  btmgmt_tty --index 0 rm-adv 0 > /dev/null 2>&1
  btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 1 > /dev/null 2>&1
  # (2) the other program holds 1; A takes 2 and is killed with its guardian; B takes 3
  hidden_advertiser "$WORK/hidden-killed.txt" "$PROFILE"
  a=$ADV
  hidden_advertiser "$log" "$second"
  b=$ADV
  check_contains "(2) A took instance 2 (another program holds 1)" "(instance 2)" "$WORK/hidden-killed.txt"
  check_contains "(2) B took instance 3" "(instance 3)" "$log"
  kill_with_guardian "$a"
  btmgmt_tty --index 0 rm-adv 1 > /dev/null 2>&1
  check_eq "(2) the other program's 1 removed: the kernel lists 1 of its 2 instances" "1" "$(mgmt_instances 0)"
  on_air "(2) A's 2 and B's unlisted 3 on the air" 4 "A=$P_ADV=yes" "B=$second_adv=yes"
  # B killed, its guardian alive: the guardian must remove the hidden 3.
  kill -KILL "$b"; wait "$b" 2>/dev/null; bg_forget "$b"
  poll 15 eval '[ ! -e /run/ibeacon/hci0-$b.instances ] && ! pgrep -f -- "--after-exit-of $b " > /dev/null'
  check_contains "(2) B's guardian says it removed the hidden 3" "ended without cleaning up: removed ibeacon's advertising instance(s) 3 on hci0" "$log"
  # (also the cleanup of what a guardian left, so that A's 2 is alone)
  rm_adv "(2) B's guardian removed instance 3 from the kernel" 3 no
  check_eq "(2) A's 2 alone: the kernel lists no instance" "0" "$(mgmt_instances 0)"
  ib stop --device hci0 > "$out" 2>&1
  check_status "(2) stop after SIGKILL of A and its guardian" 0 $? "$out"
  check_contains "(2) stop says it removed A's hidden 2" "removed ibeacon's advertising instance(s) 2 on hci0" "$out"
  # On the air: the other program's advertisement again, which hci1 must hear (so that it was
  # listening), and neither killed advertiser's beacon.
  btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 1 > /dev/null 2>&1
  on_air "(2) after the guardian and stop: neither killed advertiser's beacon on the air" 4 \
    "other=$OTHER_ADV=yes" "A=$P_ADV=no" "B=$second_adv=no"
  rm_adv "(2) stop removed instance 2 from the kernel" 2 no
  # (3) the other program's 2, alone: hidden
  log=$WORK/hidden-two.txt
  btmgmt_tty --index 0 rm-adv 1 > /dev/null 2>&1
  btmgmt_tty --index 0 add-adv -d 07ffffffcafe0102 2 > /dev/null 2>&1
  check_eq "(3) the other program's instance 2, alone, is not listed" "0" "$(mgmt_instances 0)"
  hidden_advertiser "$log" "$PROFILE" "$second"
  echo "    $(grep -o 'through the kernel (instance [0-9]*)' "$log" | tr '\n' ' ')"
  check_eq "(3) ibeacon did not take the other program's number 2" "0" "$(grep -c '(instance 2)' "$log")"
  on_air "(3) while ibeacon advertises two profiles: the other program's and both iBeacons heard" 4 \
    "other=$OTHER_ADV=yes" "first=$P_ADV=yes" "second=$second_adv=yes"
  stop_advertiser "$ADV" "$log"
  rm_adv "(3) after ibeacon exited, the kernel still has the other program's 2" 2 yes
  bluetoothd_stop
}

hidden_advertiser() {  # hidden_advertiser LOG PROFILE...: an advertiser through the kernel, in ADV
  local log=$1 want=$(($# - 1)) p args=()
  shift
  for p in "$@"; do args+=(--profile "$p"); done
  "$IBEACON_BIN" advertise --device hci0 "${args[@]}" > "$log" 2>&1 &
  ADV=$!
  BG_PIDS+=("$ADV")
  poll 30 eval '[ "$(grep -c "through the kernel" "$log")" -ge "$want" ]'
}
# rm_adv WHAT N yes|no: btmgmt rm-adv N, which says whether the kernel still had instance N.
rm_adv() {
  local out
  out=$(btmgmt_tty --index 0 rm-adv "$2" 2>&1 | tr '\n' ' ')
  case $3:$out in
    yes:*"Instance removed: $2"*|no:*"Invalid Parameters"*) pass "$1" "$out";;
    yes:*) fail "$1" "Instance removed: $2" "$out";;
    *) fail "$1" "Invalid Parameters (no instance $2)" "$out";;
  esac
}
