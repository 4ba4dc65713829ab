# shellcheck shell=bash
# Scenario ibeacon_permissions: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Raw HCI (--device raw:hci0) needs CAP_NET_RAW; kernel_capabilities covers the default path.
scenario_ibeacon_permissions() {
  need_bin || return
  need_profile || return
  if ! id "$TEST_USER" >/dev/null 2>&1; then
    useradd --no-create-home --shell /bin/sh "$TEST_USER" || { fail "useradd" "user $TEST_USER" "useradd failed"; return; }
  fi
  local uid gid
  uid=$(id -u "$TEST_USER"); gid=$(id -g "$TEST_USER")
  install -m 0755 "$IBEACON_BIN" "$WORK/ibeacon-nocap"
  # File capabilities are ignored on nosuid mounts (the guest's /tmp is one): the copy that gets
  # them lives on the root overlay, like an installed binary.
  local capdir=/usr/local/lib/ibeacon-test
  mkdir -p "$capdir"
  install -m 0755 "$IBEACON_BIN" "$capdir/ibeacon-cap"
  install -m 0644 "$PROFILE" "$WORK/profile.json"
  reset_controller hci0

  timeout 60 setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    "$WORK/ibeacon-nocap" advertise --device raw:hci0 --profile "$WORK/profile.json" > "$WORK/nocap.txt" 2>&1
  check_status "unprivileged advertise (EX_NOPERM)" 77 $? "$WORK/nocap.txt"
  check_contains "message names the capability" CAP_NET_RAW "$WORK/nocap.txt"
  check_contains "message says how to grant it at install" "make install CAPS=cap_net_raw,cap_net_admin" "$WORK/nocap.txt"

  setcap cap_net_raw,cap_net_admin+ep "$capdir/ibeacon-cap" 2>"$WORK/setcap.err"
  check_status "setcap on a copy" 0 $? "$WORK/setcap.err"
  observer_start_or_fail || return
  setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    "$capdir/ibeacon-cap" advertise --device raw:hci0 --profile "$WORK/profile.json" > "$WORK/cap.txt" 2>&1 &
  local adv=$!
  BG_PIDS+=("$adv")
  if observer_wait "$P_ADV" 30; then
    pass "unprivileged advertise with file capabilities seen on hci1"
  else
    fail "unprivileged advertise with file capabilities seen on hci1" "a report containing $P_ADV" \
      "$(observer_seen); advertiser: $(tr '\n' ' ' < "$WORK/cap.txt")"
  fi
  stop_advertiser "$adv" "$WORK/cap.txt"
  observer_stop
}
