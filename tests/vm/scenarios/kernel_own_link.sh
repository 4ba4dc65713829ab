# shellcheck shell=bash
# Scenario kernel_own_link: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# The box opens an LE link itself (as bluetoothd reconnecting a keyboard) while our connectable
# beacon is up: the central guard must leave it alone. Kernels before 5.14 (Debian 11's 5.10)
# send Device Connected without the "initiated" flag, so the tool asks the kernel which side
# opened the link (HCIGETCONNLIST); 6.1 says it in the flag too. Run it on both
# (make test-kernel VM_KERNEL=5.10 …).
scenario_kernel_own_link() {
  need_bin || return
  need_profile || return
  need_venv || return
  need_bluetoothd || return
  vhci_harness own "$VENV_PY" peripheral || return
  local harness=$VHCI_PID hci=$VHCI_HCI
  "$IBEACON_BIN" advertise -v --device "$hci" --profile "$PROFILE" > "$WORK/own-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if ! poll 30 grep -q "through the kernel" "$WORK/own-adv.txt"; then
    fail "advertiser started on $hci" "a status line" "$(tr '\n' ' ' < "$WORK/own-adv.txt")"
  fi
  # The box connects to the keyboard: an LE ATT channel opened by this host.
  l2test -n -i "$hci" -V le_public -J 4 E0:E1:E2:E3:E4:B0 > "$WORK/own-l2test.txt" 2>&1 &
  local l2=$!
  BG_PIDS+=("$l2")
  if poll 30 grep -q '"event": *"peripheral", *"what": *"connected"' "$WORK/own-vhci.out"; then
    pass "the box opens an LE link to a peripheral while its connectable beacon is up" "$(hcitool -i "$hci" con | tr '\n' ' ')"
  else
    fail "the box opens an LE link to a peripheral while its connectable beacon is up" "a peripheral connection" "$(tr '\n' ' ' < "$WORK/own-l2test.txt"); $(tail -3 "$WORK/own-vhci.err" | tr '\n' ' ')"
  fi
  sleep 10
  local drops
  drops=$(grep -c '"what": *"disconnected"' "$WORK/own-vhci.out")
  if [ "$drops" -eq 0 ] && hcitool -i "$hci" con | grep -q 'E0:E1:E2:E3:E4:B0' && alive "$l2"; then
    pass "the guard leaves the box's own link up ($(uname -r))" "up 10 s later: $(hcitool -i "$hci" con | grep -o 'LE E0:E1:E2:E3:E4:B0.*' | head -1)"
  else
    fail "the guard leaves the box's own link up ($(uname -r))" "no disconnection, link listed" "$drops disconnection(s); $(grep -i 'E0:E1:E2:E3:E4:B0' "$WORK/own-adv.txt" | head -3 | tr '\n' ' ')"
  fi
  if grep -q 'a central (E0:E1:E2:E3:E4:B0)' "$WORK/own-adv.txt"; then
    fail "the advertiser does not take the box's own link for a central" "no 'a central (E0:…:B0)' line" "$(grep 'E0:E1:E2:E3:E4:B0' "$WORK/own-adv.txt" | head -2 | tr '\n' ' ')"
  else
    pass "the advertiser does not take the box's own link for a central" "$(grep -c 'E0:E1:E2:E3:E4:B0' "$WORK/own-adv.txt") line(s) name it"
  fi
  # The advertiser is stopped while the box's link is still up. Stopped just after l2test, while
  # the kernel tears the link down (Bumble under TCG is slow to complete it), the kernel's command
  # queue waits on the disconnection and a Remove Advertising sent meanwhile was not answered
  # within the 1.5 s a signal's cleanup has (exit 143, 3 of 5 runs; RELIABILITY.md).
  stop_advertiser "$adv" "$WORK/own-adv.txt"
  stop_pid "$l2" 15
  exec 7>&-
  tail -n 3 "$WORK/own-adv.txt" | sed 's/^/        advertiser: /'
  bluetoothd_stop
  stop_pid "$harness" 15
}
