# shellcheck shell=bash
# Scenario kernel_central: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

scenario_kernel_central() {
  need_bin || return
  need_profile || return
  need_venv || return
  local py=$VENV_PY
  need_bluetoothd || return
  vhci_harness central "$py" central || return
  local harness=$VHCI_PID hci=$VHCI_HCI
  notify_listen "$WORK/notify.sock" "$WORK/notify.txt"
  NOTIFY_SOCKET=$WORK/notify.sock "$IBEACON_BIN" advertise -v --device "$hci" --profile "$PROFILE" \
    > "$WORK/central-adv.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if ! poll 30 grep -q "through the kernel" "$WORK/central-adv.txt"; then
    fail "advertiser started on $hci" "a status line" "$(tr '\n' ' ' < "$WORK/central-adv.txt")"
  fi
  if poll 20 grep -q '"what": *"connected"' "$WORK/central-vhci.out"; then
    pass "a central connects to the connectable beacon" "$(grep -c '"what": *"connected"' "$WORK/central-vhci.out") connection(s) so far"
  else
    fail "a central connects to the connectable beacon" "a connection" "$(grep '"central"' "$WORK/central-vhci.out" | tail -3 | tr '\n' ' ')"
  fi
  local t0 t1 r
  t0=$(mono); sleep 20; t1=$(mono)
  r=$(central_report "$WORK/central-vhci.out" "$WORK/notify.txt" "$t0" "$t1" "$P_MINOR")
  if [ "$(kv "$r" heard | cut -d/ -f1)" -ge 18 ]; then
    pass "the beacon is heard in at least 9 of every 10 seconds while a central keeps connecting" "$r"
  else
    fail "the beacon is heard in at least 9 of every 10 seconds while a central keeps connecting" "heard >= 18/20" "$r"
  fi
  if awk -v w="$(kv "$r" wrong_status)" 'BEGIN { exit !(w < 1.0) }'; then
    pass "the status never says advertising while a central holds the link" "$(grep -c 'STATUS=recovering' "$WORK/notify.txt") recovering update(s): $(grep 'STATUS=recovering' "$WORK/notify.txt" | head -1 | cut -c1-160)"
  else
    fail "the status never says advertising while a central holds the link" "< 1 s claimed advertising while connected" "$r; $(cut -c1-120 "$WORK/notify.txt" | tr '\n' ' ')"
  fi
  if awk -v h="$(kv "$r" held_max)" -v n="$(kv "$r" links)" 'BEGIN { exit !(n > 0 && h < 1.0) }'; then
    pass "every link is dropped at once (the GATT window is bounded)" "held at most $(kv "$r" held_max) s; Device Name read in $(kv "$r" reads) of $(kv "$r" links) links"
  else
    fail "every link is dropped at once (the GATT window is bounded)" "links held < 1 s" "$r"
  fi
  local logged
  # 5 a minute, then one with the count: the attack here lasts under two minutes.
  logged=$(grep -c 'a central (.*) connected to' "$WORK/central-adv.txt")
  if [ "$logged" -ge 1 ] && [ "$logged" -le 12 ]; then
    pass "the connections are logged, rate-limited" "$logged line(s) for $(kv "$r" links) connections in the window"
  else
    fail "the connections are logged, rate-limited" "1–12 lines (5 a minute)" "$logged: $(grep -i central "$WORK/central-adv.txt" | head -3 | tr '\n' ' ')"
  fi
  echo central-off >&7
  poll 10 grep -q '"cmd": *"central-off"' "$WORK/central-vhci.out"
  local off after
  off=$(grep '"cmd": *"central-off"' "$WORK/central-vhci.out" | grep -o '"t": *[0-9.]*' | grep -o '[0-9.]*$')
  if poll 10 eval 'tail -1 "$WORK/notify.txt" | grep -q "STATUS=advertising"'; then
    pass "advertising again once no central connects" "$(tail -1 "$WORK/notify.txt" | cut -c1-120)"
  else
    after=$(awk -v t="${off:-0}" -F'"t": *' '/"what": *"connected"/ { split($2, a, /[,}]/); if (a[1] + 0 > t) n++ } END { print n + 0 }' "$WORK/central-vhci.out")
    fail "advertising again once no central connects" "STATUS=advertising" "central-off at ${off:-never acknowledged}, $after connection(s) after it; $(tail -2 "$WORK/notify.txt" | tr '\n' ' '); $(grep -i 'central\|advertising' "$WORK/central-adv.txt" | tail -3 | tr '\n' ' ')"
  fi
  exec 7>&-
  stop_advertiser "$adv" "$WORK/central-adv.txt"
  sed 's/^/        advertiser: /' "$WORK/central-adv.txt" | grep -i 'central\|advertising' | head -8
  stop_pid "$NOTIFY_PID" 5
  # bluetoothd before the controller: removing a vhci adapter under an L2CAP socket bluetoothd
  # still holds for a link (main's advertiser leaves the central connected) crashed the 6.1
  # kernel here (list_del corruption in hci_chan_del when bluetoothd closed the socket).
  bluetoothd_stop
  stop_pid "$harness" 15
}
