#!/bin/bash
# make deb-boot: boots the cached image (scripts/debboot/image.sh) for the package's architecture
# in QEMU (TCG) — amd64: Debian 12 in qemu-system-x86_64; arm64: Debian 13 in qemu-system-aarch64
# (machine virt, Debian's arm64 kernel) — with systemd as PID 1 and lets scripts/debboot/guest.sh, run by the image's debboot-test.service
# from a 9p share, install DEB with apt and test the units as an operator would. Two boots of
# the same disk (a qcow2 overlay over the cached image): phase 1 ends with `systemctl reboot`
# (QEMU runs with -no-reboot, so it exits; this script boots the disk again), phase 2 with
# poweroff. Prints the guest's PASS/FAIL lines; exits non-zero on any FAIL or a missing phase.
#
#   scripts/debboot/run.sh ibeacon_VERSION_amd64.deb
#   scripts/debboot/run.sh ibeacon_VERSION_arm64.deb
#
# Environment: DEBBOOT_CACHE (/var/cache/ibeacon-debboot), DEBBOOT_TIMEOUT (seconds per boot,
# default 900 for amd64, 2400 for arm64), DEBBOOT_MEM (MB, 1024). The whole console of each boot
# is kept in $DEBBOOT_CACHE/run-ARCH/console-N.log. One run per architecture at a time (a second
# one waits for the first).
{
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEBBOOT_CACHE=${DEBBOOT_CACHE:-/var/cache/ibeacon-debboot}
mem=${DEBBOOT_MEM:-1024}
log() { echo "deb-boot: $*" >&2; }
die() { echo "deb-boot: error: $*" >&2; exit 1; }

deb=${1:-}
[ -s "$deb" ] || die "usage: $0 ibeacon_VERSION_ARCH.deb"
arch=$(dpkg-deb -f "$deb" Architecture)
case $arch in
amd64)
  image=bookworm-amd64 timeout_s=${DEBBOOT_TIMEOUT:-900}
  qemu=(qemu-system-x86_64 -accel tcg,thread=multi,tb-size=64 -cpu max)
  console=ttyS0 ;;
arm64)
  # Debian 13's arm64 vmlinuz is a plain Image (CONFIG_EFI_ZBOOT is not set): QEMU boots it
  # directly, no firmware. Cortex-A72, as in a Raspberry Pi 4 (and, unlike -cpu max, no pointer
  # authentication to emulate).
  image=trixie-arm64 timeout_s=${DEBBOOT_TIMEOUT:-2400}
  qemu=(qemu-system-aarch64 -M virt -accel tcg,thread=multi,tb-size=256 -cpu cortex-a72)
  console=ttyAMA0 ;;
*) die "no deb-boot for $arch (amd64, arm64)" ;;
esac
# The image under this run's overlay must not change until both boots are done: image.sh takes the
# same lock exclusively to make it again (a rebuild under a running deb-boot left boot 2 an overlay
# over a different filesystem: "EXT4-fs error … checksumming directory block 0", no init).
mkdir -p "$DEBBOOT_CACHE"
exec 7>"$DEBBOOT_CACHE/$image.lock"
flock -s -w "$timeout_s" 7 || die "image.sh is making $DEBBOOT_CACHE/$image.img again (holds $DEBBOOT_CACHE/$image.lock)"
[ -s "$DEBBOOT_CACHE/$image.stamp" ] || die "no image: run scripts/debboot/image.sh $arch"
command -v "${qemu[0]}" >/dev/null || die "needs ${qemu[0]} (make deb-boot-deps ARCH=$arch)"

run=$DEBBOOT_CACHE/run-$arch
exec 8>"$DEBBOOT_CACHE/run-$arch.lock"
flock -w "$timeout_s" 8 || die "another deb-boot run holds $DEBBOOT_CACHE/run-$arch.lock"
rm -rf --one-file-system "$run"
mkdir -p "$run/share"

# The share: the test, the package, the same package with a higher version (the upgrade), the
# profile's expected advertising bytes (computed here from the example profile in the package).
install -m 0644 "$here/guest.sh" "$run/share/guest.sh"
name=$(basename "$deb")
cp "$deb" "$run/share/$name"
version=$(dpkg-deb -f "$deb" Version)
up_version=$version+boot1
dpkg-deb -R "$deb" "$run/up"
sed -i "s/^Version: .*/Version: $up_version/" "$run/up/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz --build "$run/up" "$run/share/ibeacon_${up_version}_$arch.deb" >/dev/null
p_adv=$(python3 - "$run/up/usr/share/doc/ibeacon/examples/store12.json" <<'PY'
import json, sys, uuid
b = json.load(open(sys.argv[1]))
data = (bytes([0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]) + uuid.UUID(b["uuid"]).bytes
        + int(b["major"]).to_bytes(2, "big") + int(b["minor"]).to_bytes(2, "big")
        + (int(b["measuredPower"]) & 0xFF).to_bytes(1, "big"))
print(" ".join("%02X" % x for x in data))
PY
)
rm -rf "$run/up"
cat >"$run/share/expected.env" <<ENV
P_ADV='$p_adv'
DEB='$name'
DEB_UP='ibeacon_${up_version}_$arch.deb'
VERSION_UP='$up_version'
ENV

qemu-img create -q -f qcow2 -b "$DEBBOOT_CACHE/$image.img" -F raw "$run/disk.qcow2"
t_all=$SECONDS
for boot in 1 2; do
  t0=$SECONDS
  log "boot $boot (console: $run/console-$boot.log)"
  # The guest's lines that matter stream through; the whole console is kept.
  set +e
  timeout --foreground -k 10 "$timeout_s" "${qemu[@]}" -smp 2 -m "$mem" \
    -display none -monitor none -no-reboot -nic none \
    -chardev stdio,id=con,signal=off -serial chardev:con \
    -kernel "$DEBBOOT_CACHE/$image.vmlinuz" -initrd "$DEBBOOT_CACHE/$image.initrd.img" \
    -append "root=/dev/vda rw console=$console loglevel=4 systemd.show_status=0 net.ifnames=0" \
    -drive "file=$run/disk.qcow2,if=virtio,format=qcow2,cache=unsafe" \
    -virtfs "local,path=$run/share,mount_tag=debboot,security_model=none,readonly=on" \
    -device virtio-rng-pci </dev/null 2>"$run/qemu-$boot.err" |
    sed -u -E 's/\r$//; s/\x1b\[[?!0-9;]*[A-Za-z]//g; s/\x1b\][0-9;]*(\x07|\x1b\\)//g; s/^\[ *[0-9.]+\] (bash|guest\.sh)\[[0-9]+\]: //' |
    tee "$run/console-$boot.log" |
    grep --line-buffered -aE '^(PASS|FAIL|DEBBOOT|  )'
  rc=${PIPESTATUS[0]}  # the journal's console prefix ("[ 61.3] bash[284]: ") is cut above, and
  # the terminal resets systemd 257 writes to the console (ESC [ ! p, ESC ] 104 BEL, ESC [ ? 7 h)
  set -e
  log "boot $boot: qemu exit $rc after $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] || { tail -5 "$run/qemu-$boot.err" >&2; }
  if ! grep -qaE "^DEBBOOT phase $boot: [0-9]+ passed" "$run/console-$boot.log"; then
    echo "FAIL boot $boot: no summary from guest.sh (timeout or crash; see $run/console-$boot.log)" | tee -a "$run/console-$boot.log"
  fi
done
tr -d '\r' <"$run/console-1.log" >"$run/console.log"; tr -d '\r' <"$run/console-2.log" >>"$run/console.log"
npass=$(grep -caE '^PASS ' "$run/console.log" || true)
nfail=$(grep -caE '^FAIL ' "$run/console.log" || true)
done_ok=$(grep -caE '^DEBBOOT DONE' "$run/console.log" || true)
log "$arch: $npass passed, $nfail failed, $((SECONDS - t_all)) s for both boots"
[ "$nfail" -eq 0 ] && [ "$done_ok" -ge 1 ] && [ "$npass" -gt 0 ]
exit
}
