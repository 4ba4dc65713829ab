# shellcheck shell=bash
# Scenario ibeacon_calibrate_vhci: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# A Bumble emulated controller behind /dev/vhci (tests/harness/bumble_harness.py --vhci): the
# kernel registers it as a third adapter, and ibeacon calibrates through the real BlueZ socket
# against a Bumble beacon whose RSSI the harness draws from N(-59 dBm, 4 dB), seed 3.
scenario_ibeacon_calibrate_vhci() {
  need_bin || return
  need_profile || return
  need_venv || return
  local py=$VENV_PY
  local copy=$WORK/vhci.json
  cp "$PROFILE" "$copy"
  "$py" tests/harness/bumble_harness.py --vhci --keep-running --rssi gauss:-59,4 --seed 3 \
    --beacon "$P_UUID,$P_MAJOR,$P_MINOR,$P_POWER,100" > "$WORK/vhci.out" 2> "$WORK/vhci.err" &
  local harness=$!
  BG_PIDS+=("$harness")
  poll 60 grep -q '"event": *"ready"' "$WORK/vhci.out"
  local hci
  hci=$(grep -o '"hci": *"hci[0-9]*"' "$WORK/vhci.out" | grep -o 'hci[0-9][0-9]*' | head -1)
  if [ -z "$hci" ]; then
    fail "Bumble controller on /dev/vhci" "a new adapter" "$(tr '\n' ' ' < "$WORK/vhci.out") $(tail -5 "$WORK/vhci.err" | tr '\n' ' ')"
    stop_pid "$harness" 15
    return
  fi
  pass "Bumble controller on /dev/vhci" "$hci"
  # σ 4 dB usually stops after 10-15 s; a false alarm of the slow-variation test waits for a margin.
  ib_calibrate --device "$hci" --profile "$copy" --json > "$WORK/vhci-cal.json" 2> "$WORK/vhci-cal.err"
  check_status "calibrate through $hci (real RSSI)" 0 $? "$WORK/vhci-cal.err"
  local got
  got=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["measuredPower"], round(d["estimate"],2), d["samples"])' "$WORK/vhci-cal.json" 2>&1)
  local power=${got%% *}
  if [ "$power" -ge -60 ] 2>/dev/null && [ "$power" -le -58 ]; then
    pass "written measured power within 1 dB of -59" "$got (measuredPower, estimate, samples)"
  else
    fail "written measured power within 1 dB of -59" "-60…-58" "$got"
  fi
  check_contains "profile now holds the calibration" '"calibration"' "$copy"
  stop_pid "$harness" 15
}
