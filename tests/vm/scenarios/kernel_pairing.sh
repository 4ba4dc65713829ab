# shellcheck shell=bash
# Scenario kernel_pairing: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# A real pairing between hci0 and hci1 (btmgmt pair, BR/EDR link key and LE long term key, bonded
# by bluetoothd) while ibeacon scans at -vv through the kernel (every management event reaches its
# socket) and through raw HCI with --btsnoop: no key, from bluetoothd's store, may appear in the
# tool's log or capture. btmon's own capture of the same pairing must hold the keys (so the search
# is shown to find them).
# After a failed pairing try: hci1 drops what it holds of hci0 (link and keys) and hci0 of hci1,
# so the next try starts from nothing (LE's "Busy" came after a failed try).
pairing_undo() {  # pairing_undo ADDRESS_TYPE(0 BR/EDR, 1 LE public)
  btmgmt_tty --index 1 unpair -t "$1" "$HCI0_ADDR" > /dev/null 2>&1
  btmgmt_tty --index 0 unpair -t "$1" "$HCI1_ADDR" > /dev/null 2>&1
  sleep 2
}

# When the checks are done: no bond left on either side (bluetoothd's store and the kernel's keys)
# and both adapters neither bondable nor connectable, as they were, for the scenarios after it.
# Then each adapter's settings as they were before bluetoothd started (PAIRING_SETTINGS_BEFORE):
# what bluetoothd and the scenario turned on (Low Energy among them) is turned off again, so the
# scenarios after it find the adapters as the controllers scenario left them (powered, LE off:
# `devices` shows the raw path).
pairing_forget() {
  local t i setting
  for t in 0 1; do pairing_undo "$t"; done
  bluetoothd_stop
  rm -rf "/var/lib/bluetooth/$HCI0_ADDR/$HCI1_ADDR" "/var/lib/bluetooth/$HCI1_ADDR/$HCI0_ADDR"
  for i in 0 1; do
    for setting in connectable:connectable bondable:bondable secure-conn:sc le:le ssp:ssp; do
      case " ${PAIRING_SETTINGS_BEFORE[$i]} " in *" ${setting%%:*} "*) continue ;; esac
      btmgmt_tty --index "$i" "${setting#*:}" off > /dev/null
    done
    # bluetoothd powers its adapters off when it stops.
    case " ${PAIRING_SETTINGS_BEFORE[$i]} " in *" powered "*) btmgmt_tty --index "$i" power on > /dev/null ;; esac
    echo "        hci$i after: $(mgmt_settings "$i")"
  done
}
mgmt_settings() { btmgmt_tty --index "$1" info | sed -n 's/.*current settings: *//p' | tr -s ' ' | sed 's/ $//'; }

# Up to four tries of `btmgmt pair` from hci1 to hci0, every answer appended to FILE.
pair_tries() {  # pair_tries ADDRESS_TYPE(0 BR/EDR, 1 LE public) FILE
  local try
  : > "$2"
  for try in 1 2 3 4; do
    echo "try $try:" >> "$2"
    btmgmt_tty --index 1 pair -c 3 -t "$1" "$HCI0_ADDR" >> "$2" 2>&1
    grep -q 'Paired with' "$2" && return 0
    pairing_undo "$1"
  done
  return 1
}

scenario_kernel_pairing() {
  need_bin || return
  local i
  PAIRING_SETTINGS_BEFORE=("$(mgmt_settings 0)" "$(mgmt_settings 1)")
  echo "        before bluetoothd: hci0 ${PAIRING_SETTINGS_BEFORE[0]}; hci1 ${PAIRING_SETTINGS_BEFORE[1]}"
  need_bluetoothd || return
  # Earlier scenarios drive both controllers through raw HCI too, behind the kernel's back: a
  # power cycle through the kernel sets each up again from its Reset (event masks, Simple Pairing).
  for i in 0 1; do
    echo "        hci$i before: $(btmgmt_tty --index "$i" info | grep 'current settings' | tr -s ' ')"
    btmgmt_tty --index "$i" power off > /dev/null; btmgmt_tty --index "$i" power on > /dev/null
    btmgmt_tty --index "$i" bondable on > /dev/null; btmgmt_tty --index "$i" connectable on > /dev/null
    echo "        hci$i now: $(btmgmt_tty --index "$i" info | grep 'current settings' | tr -s ' ')"
  done
  echo "        bluetoothd's store: $(find /var/lib/bluetooth -type f 2>/dev/null | tr '\n' ' ')"
  btmon -w "$WORK/pair-btmon.btsnoop" > /dev/null 2>&1 &
  local mon=$!
  BG_PIDS+=("$mon")
  "$IBEACON_BIN" scan -vv --device hci0 --duration 180 > "$WORK/pair-scan-kernel.txt" 2>&1 &
  local k=$!
  BG_PIDS+=("$k")
  "$IBEACON_BIN" scan -vv --device raw:hci1 --duration 180 --btsnoop "$WORK/pair-raw.btsnoop" > "$WORK/pair-scan-raw.txt" 2>&1 &
  local r=$!
  BG_PIDS+=("$r")
  sleep 5
  # Pairing btvirt's controllers fails now and then (Authentication Failed, or no answer within
  # btmgmt's 20 s under TCG): up to four tries each, while both scans still run; a failed try is
  # undone on both sides (unpair) before the next, and every try's answer is kept for the report.
  pair_tries 0 "$WORK/pair-bredr.txt"
  pair_tries 1 "$WORK/pair-le.txt"
  sleep 3
  stop_pid "$k" 15; stop_pid "$r" 15; stop_pid "$mon" 15
  # bluetoothd's store: [LinkKey] / [LongTermKey] / [PeripheralLongTermKey] Key=HEX
  local keys
  keys=$(cat /var/lib/bluetooth/*/*/info 2>/dev/null | sed -n 's/^Key=\([0-9A-Fa-f]\{32\}\)$/\1/p' | sort -u | tr '\n' ' ')
  if [ -z "$keys" ]; then
    fail "hci1 pairs with hci0 and bluetoothd stores the keys" "Key= lines under /var/lib/bluetooth" "$(tr '\n' ' ' < "$WORK/pair-bredr.txt"); $(tr '\n' ' ' < "$WORK/pair-le.txt")"
    echo "        btmon, the pairing's events and failures:"
    btmon -r "$WORK/pair-btmon.btsnoop" 2>/dev/null \
      | grep -E 'Authentication|IO Capability|User Confirmation|Link Key|PIN Code|Simple Pairing|Encryption|Connect|Status: |Reason' \
      | grep -v 'Status: Success' | head -60 | sed "s/^/          /"
    pairing_forget
    return
  fi
  pass "hci1 pairs with hci0 and bluetoothd stores the keys" "$(echo "$keys" | wc -w) key(s); $(grep -ho 'Paired with.*' "$WORK/pair-bredr.txt" "$WORK/pair-le.txt" | tr '\n' ' ')(BR/EDR $(grep -c '^try' "$WORK/pair-bredr.txt") try/tries, LE $(grep -c '^try' "$WORK/pair-le.txt"))"
  local found
  # Each key in both byte orders, as bytes and as hex with or without separators.
  found=$("$PY" - "$WORK" $keys <<'PY'
import pathlib, re, sys
work = pathlib.Path(sys.argv[1])
keys = [bytes.fromhex(k) for k in sys.argv[2:]]
def hits(path):
    data = path.read_bytes()
    text = re.sub(rb'[^0-9a-f]', b'', data.lower())
    out = []
    for k in keys:
        for v in (k, k[::-1]):
            if v in data or v.hex().encode() in text:
                out.append(v.hex())
    return out
for name in ('pair-btmon.btsnoop', 'pair-scan-kernel.txt', 'pair-scan-raw.txt', 'pair-raw.btsnoop'):
    p = work / name
    print(f"{name}={len(hits(p)) if p.exists() else 'missing'}")
PY
)
  if echo "$found" | grep -q '^pair-btmon.btsnoop=[1-9]'; then
    pass "btmon's capture of the pairing holds the keys (the search finds them)" "$(echo "$found" | tr '\n' ' ')"
  else
    fail "btmon's capture of the pairing holds the keys (the search finds them)" "pair-btmon.btsnoop >= 1" "$(echo "$found" | tr '\n' ' ')"
  fi
  if echo "$found" | grep -v '^pair-btmon' | grep -qv '=0$'; then
    fail "no key in ibeacon's -vv logs or its --btsnoop capture" "0 everywhere" "$(echo "$found" | tr '\n' ' ')"
  else
    pass "no key in ibeacon's -vv logs or its --btsnoop capture" "$(echo "$found" | tr '\n' ' '); $(wc -l < "$WORK/pair-scan-kernel.txt") + $(wc -l < "$WORK/pair-scan-raw.txt") log lines"
  fi
  if grep -qi 'passkey\|confirm.*value' "$WORK/pair-scan-kernel.txt" "$WORK/pair-scan-raw.txt"; then
    fail "no pairing parameter in the logs" "none" "$(grep -i 'passkey\|confirm' "$WORK/pair-scan-kernel.txt" "$WORK/pair-scan-raw.txt" | head -2 | tr '\n' ' ')"
  fi
  pairing_forget
}
