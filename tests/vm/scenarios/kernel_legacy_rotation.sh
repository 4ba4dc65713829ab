# shellcheck shell=bash
# Scenario kernel_legacy_rotation: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# 6. A legacy-only controller has one advertising set: the kernel takes turns between the
#    instances of all programs (each for its Duration: ibeacon asks for none, so the kernel's
#    default rotation, 2 s). The Bumble controller on /dev/vhci with --features legacy (no LE
#    extended advertising feature or commands); the harness's own scanner hears it over the air.
scenario_kernel_legacy_rotation() {
  need_bin || return
  need_profile || return
  need_venv || return
  local py=$VENV_PY
  need_bluetoothd || return
  "$py" tests/harness/bumble_harness.py --vhci --keep-running --features legacy --scanner --no-adv-delay \
    > "$WORK/rot-vhci.out" 2> "$WORK/rot-vhci.err" &
  local harness=$!
  BG_PIDS+=("$harness")
  poll 180 grep -q '"event": *"ready"' "$WORK/rot-vhci.out"
  local hci idx
  hci=$(grep -o '"hci": *"hci[0-9]*"' "$WORK/rot-vhci.out" | grep -o 'hci[0-9][0-9]*' | head -1)
  idx=${hci#hci}
  if [ -z "$hci" ] || ! poll 15 mgmt_powered "$idx"; then
    fail "legacy Bumble controller on /dev/vhci, powered by bluetoothd" "a new powered adapter" "${hci:-none}: $(tail -3 "$WORK/rot-vhci.err" | tr '\n' ' ')"
    stop_pid "$harness" 15
    bluetoothd_stop
    return
  fi
  btmgmt_tty --index "$idx" advinfo > "$WORK/rot-advinfo.txt" 2>&1
  pass "legacy Bumble controller on /dev/vhci, powered by bluetoothd" "$hci; $(grep -i 'max\|instances' "$WORK/rot-advinfo.txt" | tr '\n' ' ')"
  local second=$WORK/rot-second.json second_minor=$(( (P_MINOR + 1) % 65536 ))
  second_profile "$second" > /dev/null
  "$IBEACON_BIN" advertise -v --device "$hci" --profile "$PROFILE" > "$WORK/rot-a.txt" 2>&1 &
  local a=$!
  BG_PIDS+=("$a")
  poll 30 grep -q "through the kernel" "$WORK/rot-a.txt"
  # The kernel answers Add Extended Advertising Parameters on a legacy controller with TX power
  # 127, its "unknown": the status line says unknown, never "127 dBm".
  if grep -q "TX power unknown" "$WORK/rot-a.txt" && ! grep -q "127 dBm" "$WORK/rot-a.txt"; then
    pass "a legacy controller's TX power through the kernel is unknown, not 127 dBm" "$(grep -o 'TX power [a-z0-9 -]*' "$WORK/rot-a.txt" | head -1)"
  else
    fail "a legacy controller's TX power through the kernel is unknown, not 127 dBm" "TX power unknown" "$(grep 'through the kernel' "$WORK/rot-a.txt")"
  fi
  sleep 1
  local t0 t1 alone both
  t0=$(mono); sleep 4; t1=$(mono)
  alone=$(harness_rates "$WORK/rot-vhci.out" "$t0" "$t1" "$P_MINOR" "$second_minor")
  if awk -v r="$(rate_of "$alone" "$P_MINOR")" 'BEGIN { exit !(r >= 7) }'; then
    pass "one instance on the legacy controller: on the air all the time (100 ms interval)" "$alone"
  else
    fail "one instance on the legacy controller: on the air all the time (100 ms interval)" "minor $P_MINOR >= 7/s" "$alone; $(tr '\n' ' ' < "$WORK/rot-a.txt")"
  fi
  "$IBEACON_BIN" advertise -v --device "$hci" --profile "$second" > "$WORK/rot-b.txt" 2>&1 &
  local b=$!
  BG_PIDS+=("$b")
  poll 30 grep -q "through the kernel" "$WORK/rot-b.txt"
  sleep 1
  t0=$(mono); sleep 10; t1=$(mono)
  both=$(harness_rates "$WORK/rot-vhci.out" "$t0" "$t1" "$P_MINOR" "$second_minor")
  local ra rb runs
  ra=$(rate_of "$both" "$P_MINOR"); rb=$(rate_of "$both" "$second_minor"); runs=$(rate_of "$both" runs)
  # Each gets about half the airtime: ~5/s of its 10/s, in turns of ~2 s.
  if awk -v a="$ra" -v b="$rb" 'BEGIN { exit !(a >= 2.5 && b >= 2.5 && a + b >= 7) }'; then
    pass "two instances on the legacy controller: both heard, taking turns" "$both (reports/s; runs = mean seconds on the air per turn)"
  else
    fail "two instances on the legacy controller: both heard, taking turns" "each >= 2.5/s, together >= 7/s" "$both; $(tail -2 "$WORK/rot-b.txt" | tr '\n' ' ')"
  fi
  if awk -v r="$runs" 'BEGIN { exit !(r >= 1.0 && r <= 3.0) }'; then
    pass "the kernel rotates instances about every 2 s (its default duration)" "${runs} s per turn"
  else
    fail "the kernel rotates instances about every 2 s (its default duration)" "1.0–3.0 s" "$both"
  fi
  stop_pid "$b" 5
  check_status "second advertiser ended by SIGTERM exits 0" 0 "$STOPPED_STATUS" "$WORK/rot-b.txt"
  stop_pid "$a" 5
  check_status "first advertiser ended by SIGTERM exits 0" 0 "$STOPPED_STATUS" "$WORK/rot-a.txt"
  stop_pid "$harness" 15
  bluetoothd_stop
}
