# shellcheck shell=bash
# Scenario kernel_capabilities: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# 2. Advertising needs CAP_NET_ADMIN only: as root without CAP_NET_RAW, and a copy with only
#    cap_net_admin run as an unprivileged user; without it, exit 77 naming CAP_NET_ADMIN.
scenario_kernel_capabilities() {
  need_bin || return
  need_profile || return
  need_bluetoothd || return
  if ! id "$TEST_USER" >/dev/null 2>&1; then
    useradd --no-create-home --shell /bin/sh "$TEST_USER" || { fail "useradd" "user $TEST_USER" "useradd failed"; return; }
  fi
  local uid gid capdir=/usr/local/lib/ibeacon-test
  uid=$(id -u "$TEST_USER"); gid=$(id -g "$TEST_USER")
  mkdir -p "$capdir"
  install -m 0755 "$IBEACON_BIN" "$capdir/ibeacon-admin"
  install -m 0755 "$IBEACON_BIN" "$WORK/ibeacon-nocap"
  install -m 0644 "$PROFILE" "$WORK/profile.json"

  capsh --drop=cap_net_raw -- -c "exec $IBEACON_BIN advertise --device hci0 --profile $WORK/profile.json" \
    > "$WORK/noraw.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if poll 30 grep -q "through the kernel" "$WORK/noraw.txt"; then
    pass "root without CAP_NET_RAW advertises through the kernel"
  else
    fail "root without CAP_NET_RAW advertises through the kernel" "a status line" "$(tr '\n' ' ' < "$WORK/noraw.txt")"
  fi
  kernel_observe 4
  local n
  n=$(count_reports_with "$P_ADV")
  if [ "$n" -gt 0 ]; then pass "heard on hci1 (no CAP_NET_RAW)" "$n reports"; else fail "heard on hci1 (no CAP_NET_RAW)" "reports" "$(observer_seen)"; fi
  stop_advertiser "$adv" "$WORK/noraw.txt"

  # What `make install` grants by default (the Makefile's CAPS), as it does it.
  local caps
  caps=$(awk '/^CAPS \?=/ { print $3 }' Makefile)
  check_eq "make install grants cap_net_admin only by default (Makefile CAPS)" "cap_net_admin" "$caps"
  setcap "$caps+ep" "$capdir/ibeacon-admin" 2>"$WORK/setcap.err"
  check_status "setcap $caps+ep on a copy" 0 $? "$WORK/setcap.err"
  # As systemd's RuntimeDirectory=ibeacon/NAME does for the unit's user: a directory of the
  # user's below root's /run/ibeacon, where the records go (IBEACON_RUNTIME_DIR is ignored by
  # the setcap'd binary: AT_SECURE).
  mkdir -p /run/ibeacon && install -d -o "$uid" -g "$gid" -m 0755 "/run/ibeacon/$TEST_USER"
  setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    "$capdir/ibeacon-admin" advertise --device hci0 --profile "$WORK/profile.json" > "$WORK/admin.txt" 2>&1 &
  adv=$!
  BG_PIDS+=("$adv")
  if poll 30 grep -q "through the kernel" "$WORK/admin.txt"; then
    pass "unprivileged user with cap_net_admin only advertises"
  else
    fail "unprivileged user with cap_net_admin only advertises" "a status line" "$(tr '\n' ' ' < "$WORK/admin.txt")"
  fi
  check_eq "its record is in the user's directory below /run/ibeacon" "/run/ibeacon/$TEST_USER/hci0-$adv.instances" \
    "$(ls /run/ibeacon/"$TEST_USER"/hci0-"$adv".instances 2>/dev/null)"
  kernel_observe 4
  n=$(count_reports_with "$P_ADV")
  if [ "$n" -gt 0 ]; then pass "heard on hci1 (cap_net_admin only)" "$n reports"; else fail "heard on hci1 (cap_net_admin only)" "reports" "$(observer_seen)"; fi
  stop_advertiser "$adv" "$WORK/admin.txt"

  timeout 60 setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    "$WORK/ibeacon-nocap" advertise --device hci0 --profile "$WORK/profile.json" > "$WORK/nocap.txt" 2>&1
  check_status "no capabilities: advertise exits 77 (EX_NOPERM)" 77 $? "$WORK/nocap.txt"
  check_contains "message names CAP_NET_ADMIN" CAP_NET_ADMIN "$WORK/nocap.txt"
  check_eq "no instance left behind" "0" "$(mgmt_instances 0)"
  bluetoothd_stop
}
