# shellcheck shell=bash
# Scenario kernel_stable_address: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# A beacon keeps one address across restarts through the kernel (issue 25): `advertise` on hci0
# next to bluetoothd, stopped and started again; hci1 (kernel LE discovery, hcidump -R) is the
# address-keyed observer. With the default "address": "public" both runs must come from hci0's
# identity address (connectable, ADV_IND); a profile asking for "non-resolvable" is the control:
# non-connectable from a new address at every start (what every start did before).
scenario_kernel_stable_address() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  local identity nonres=$WORK/nonresolvable.json run kind profile seen=() adv
  identity=$(btmgmt_tty --index 0 info | awk '/^hci0:/ { getline; print toupper($2) }')
  [ -n "$identity" ] || identity=$(hciconfig hci0 | awk '/BD Address/ { print $3 }')
  "$PY" - "$PROFILE" "$nonres" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["address"] = "non-resolvable"
json.dump(p, open(sys.argv[2], "w"))
PYEOF
  for kind in public non-resolvable; do
    profile=$PROFILE; [ "$kind" = public ] || profile=$nonres
    seen=()
    for run in 1 2; do
      "$IBEACON_BIN" advertise --device hci0 --profile "$profile" --json > "$WORK/stable-$kind-$run.txt" 2>&1 &
      adv=$!
      BG_PIDS+=("$adv")
      poll 30 grep -q '"path":"mgmt"' "$WORK/stable-$kind-$run.txt"
      kernel_observe 4
      seen+=("$(report_addresses "$P_ADV" | tr '\n' ';')")
      stop_advertiser "$adv" "$WORK/stable-$kind-$run.txt"
      if [ "$kind" = public ]; then
        check_contains "$kind run $run: the status line names hci0's address" "\"address\":\"$identity\"" "$WORK/stable-$kind-$run.txt"
      fi
    done
    echo "    $kind: run 1 heard from ${seen[0]:-nothing}, run 2 from ${seen[1]:-nothing}"
    if [ "$kind" = public ]; then
      check_eq "address public: run 1 heard from hci0's identity address, connectable (ADV_IND)" \
        "$identity public" "$(cut -d' ' -f1,2 <<< "${seen[0]%;}")"
      check_eq "address public: run 2 from the same address as run 1" "${seen[0]}" "${seen[1]}"
      case ${seen[0]} in *" 00;"|*" 0013;") pass "address public: the PDU is ADV_IND (connectable)" "${seen[0]}";;
        *) fail "address public: the PDU is ADV_IND (connectable)" "00 or 0013" "${seen[0]}";; esac
    else
      case ${seen[0]} in *" random 03;"|*" random 0010;") pass "address non-resolvable: ADV_NONCONN_IND from a random address" "${seen[0]}";;
        *) fail "address non-resolvable: ADV_NONCONN_IND from a random address" "random 03 or 0010" "${seen[0]}";; esac
      if [ -n "${seen[1]}" ] && [ "${seen[0]}" != "${seen[1]}" ]; then
        pass "address non-resolvable: a new address at the second start (the kernel's choice)" "${seen[1]}"
      else
        fail "address non-resolvable: a new address at the second start (the kernel's choice)" "two different addresses" "${seen[0]} / ${seen[1]}"
      fi
    fi
  done
  stable_address_theengs "$identity"
  bluetoothd_stop
}

# The same restart seen by Theengs Gateway (a consumer nobody here wrote: bleak over bluetoothd's
# D-Bus on hci1, publishing each decoded beacon to MQTT under its address), from the virtualenv
# `make venv-theengs` (mk/vm.mk) builds. Its "id" for our beacon must be hci0's identity address
# in both runs: one device, not a new one per restart.
THEENGS_VENV=${THEENGS_VENV:-$PWD/.venv-theengs}
stable_address_theengs() {
  local identity=$1 uuid run adv from ids=() port=18830 mqtt gw sub
  if [ ! -x "$THEENGS_VENV/bin/python" ]; then
    fail "Theengs Gateway is installed" "$THEENGS_VENV (make venv-theengs)" "missing"; return
  fi
  uuid=$(tr -d '-' <<< "$P_UUID" | tr A-F a-f)
  ip link set lo up
  printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" > "$WORK/mosquitto.conf"
  mosquitto -c "$WORK/mosquitto.conf" > "$WORK/mosquitto.log" 2>&1 &
  mqtt=$!; BG_PIDS+=("$mqtt")
  poll 10 mosquitto_pub -h 127.0.0.1 -p "$port" -t probe -m x
  mosquitto_sub -h 127.0.0.1 -p "$port" -v -t 'home/TheengsGateway/BTtoMQTT/#' > "$WORK/theengs.mqtt" 2>&1 &
  sub=$!; BG_PIDS+=("$sub")
  (cd "$WORK" && HOME=$WORK exec "$THEENGS_VENV/bin/python" -m TheengsGateway -c "$WORK/theengsgw.conf" \
    -H 127.0.0.1 -P "$port" -a hci1 -D 0 -pr 1 -sd 7 -tb 5 > "$WORK/theengs.log" 2>&1) &
  gw=$!; BG_PIDS+=("$gw")
  for run in 1 2; do
    from=$(($(wc -l < "$WORK/theengs.mqtt") + 1))
    "$IBEACON_BIN" advertise --device hci0 --profile "$PROFILE" > "$WORK/theengs-adv-$run.txt" 2>&1 &
    adv=$!; BG_PIDS+=("$adv")
    # Theengs scans 7 s every 12 s; its Python start under TCG takes longer than that.
    poll 90 sh -c "tail -n +$from '$WORK/theengs.mqtt' | grep -q '$uuid'"
    ids+=("$(tail -n +"$from" "$WORK/theengs.mqtt" | grep "$uuid" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | sort -u | tr '\n' ' ')")
    stop_advertiser "$adv" "$WORK/theengs-adv-$run.txt"
  done
  echo "    Theengs Gateway: run 1 published our beacon as ${ids[0]:-nothing}, run 2 as ${ids[1]:-nothing}"
  check_eq "Theengs Gateway: run 1 publishes our beacon under hci0's identity address" "$identity " "${ids[0]}"
  check_eq "Theengs Gateway: run 2 under the same address (one device across the restart)" "${ids[0]}" "${ids[1]}"
  stop_pid "$gw" 10; stop_pid "$sub" 5; stop_pid "$mqtt" 5
}

# MQTT through the kernel path: `advertise --device hci0 --mqtt` next to bluetoothd publishes the
# beacon's status to a mosquitto in the guest; power off → recovering (OFF), power on → advertising
# (ON) with the cause; SIGTERM → stopped and availability offline (README "Home Assistant and MQTT").
retained_mqtt() {  # retained_mqtt PORT TOPIC → the retained payload (empty if none)
  timeout 5 mosquitto_sub -h 127.0.0.1 -p "$1" -t "$2" --retained-only -W 1 2>/dev/null | head -1
}
