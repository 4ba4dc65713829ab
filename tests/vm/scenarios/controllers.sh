# shellcheck shell=bash
# Scenario controllers: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_controllers() {
  modprobe hci_vhci 2>"$WORK/modprobe.err"
  check_status "modprobe hci_vhci" 0 $? "$WORK/modprobe.err"
  both_or_gone() { [ -e /sys/class/bluetooth/hci0 ] && [ -e /sys/class/bluetooth/hci1 ] || dead "$BTVIRT_PID"; }
  # The kernel initialises a new controller at once; when btvirt answers its first HCI Reset too
  # late (seen under TCG: "hci0: Opcode 0x0c03 failed: -110") the setup fails and the adapter,
  # though it can still be brought up with hciconfig, never joins the management interface's
  # index list. Start btvirt again until both adapters are there (at most 3 times).
  local try
  for try in 1 2 3; do
    btvirt -l2 > "$WORK/btvirt.log" 2>&1 &
    BTVIRT_PID=$!
    poll 15 both_or_gone
    poll 5 mgmt_lists 0 1 && break
    echo "    btvirt try $try: the management interface lists $(btmgmt_tty info | grep -c '^hci[0-9]*:') adapter(s); starting btvirt again"
    kill -TERM "$BTVIRT_PID" 2>/dev/null; wait "$BTVIRT_PID" 2>/dev/null
    poll 10 eval '[ ! -e /sys/class/bluetooth/hci0 ]'
  done
  if mgmt_lists 0 1; then pass "management interface lists hci0 and hci1" "btvirt try $try"; else fail "management interface lists hci0 and hci1" "both" "$(btmgmt_tty info | head -3 | tr '\n' ' ')"; fi
  check_eq "btvirt -l2 created controllers" "hci0 hci1" "$(ls /sys/class/bluetooth 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
  if ! kill -0 "$BTVIRT_PID" 2>/dev/null; then
    fail "btvirt running" "btvirt alive" "exited: $(cat "$WORK/btvirt.log")"
    return
  fi
  local dev addr want
  for dev in hci0 hci1; do
    timeout 10 hciconfig "$dev" up 2>"$WORK/up.err"
    check_status "hciconfig $dev up" 0 $? "$WORK/up.err"
  done
  timeout 10 hciconfig > "$WORK/hciconfig.txt" 2>&1
  for dev in hci0 hci1; do
    want=$HCI0_ADDR; [ "$dev" = hci1 ] && want=$HCI1_ADDR
    addr=$(awk -v d="$dev:" '$1 == d { on = 1; next } /^[^ \t]/ { on = 0 } on && /BD Address:/ { print $3; exit }' "$WORK/hciconfig.txt")
    check_eq "hciconfig: $dev address" "$want" "$addr"
    state=$(awk -v d="$dev:" '$1 == d { on = 1; next } /^[^ \t]/ { on = 0 } on && /RUNNING|DOWN/ { $1 = $1; print; exit }' "$WORK/hciconfig.txt")
    check_eq "hciconfig: $dev state" "UP RUNNING" "$state"
  done
}
