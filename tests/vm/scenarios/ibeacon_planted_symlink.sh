# shellcheck shell=bash
# Scenario ibeacon_planted_symlink: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# Issue 11, item 1, under the guest's Debian kernel: a link another user planted in a sticky
# world-writable directory is refused by ibeacon itself, with fs.protected_symlinks on (Debian's
# default) and off (the host's setting). With it on, the kernel would refuse the open anyway;
# with it off, only ibeacon's own check stands between root and the victim file.
scenario_ibeacon_planted_symlink() {
  need_bin || return
  if ! id "$TEST_USER" >/dev/null 2>&1; then
    useradd --no-create-home --shell /bin/sh "$TEST_USER" || { fail "useradd" "user $TEST_USER" "useradd failed"; return; }
  fi
  local original setting dir victim force rc out=$WORK/planted.out
  original=$(sysctl -n fs.protected_symlinks)
  for setting in 1 0; do
    sysctl -qw fs.protected_symlinks=$setting
    dir=$(mktemp -d /tmp/planted.XXXXXX)
    chmod 1777 "$dir"
    victim=$WORK/victim-$setting.txt
    echo "thesis, chapter 1" > "$victim"
    chmod 600 "$victim"
    runuser -u "$TEST_USER" -- ln -s "$victim" "$dir/store12.json"
    for force in "" --force; do
      ib profile new "$dir/store12.json" --major 12 --minor 1 $force > "$out" 2>&1; rc=$?
      check_status "profile new ${force:-without --force} through a planted link, protected_symlinks=$setting" 73 $rc "$out"
      check_contains "the message names the link's owner" "symbolic link owned by uid $(id -u "$TEST_USER")" "$out"
    done
    check_eq "victim unchanged, protected_symlinks=$setting" "thesis, chapter 1" "$(cat "$victim")"
    rm -rf "$dir"
  done
  sysctl -qw fs.protected_symlinks="$original"
}
