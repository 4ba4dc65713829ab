#!/bin/busybox sh
# PID 1 of the test VM (see scripts/vm/run.sh). Packed into the initramfs by prepare.sh.
#
# Stage 1 (initramfs): load the 9p/virtio/overlay modules, mount the host's / (9p tag
# "hostroot", read-only) under a tmpfs overlay, mount the exchange directory (9p tag "xchg",
# read-write) at /run/vm/xchg, bind the unpacked kernel's modules onto /lib/modules/<kver>,
# then switch_root. switch_root (not a plain chroot) matters: the kernel runs /sbin/modprobe
# for module auto-loading (ecb(aes), cmac when a Bluetooth controller registers) in PID 1's
# root, which must be the new root for that path to exist.
# Stage 2 (new root): run /run/vm/xchg/cmd.sh, write its exit status to
# /run/vm/xchg/status, print a marker line, power off.

bb=/bin/busybox
[ "$1" = stage2 ] && bb=/run/vm/busybox

halt_now() {
  $bb sync
  $bb poweroff -f
  $bb sleep 5
  $bb reboot -f      # run.sh starts qemu with -no-reboot, so a reset also ends it
  while :; do $bb sleep 60; done
}

fail() {
  echo "vm-init: error: $*"
  echo "VM-EXIT-STATUS=125"
  halt_now
}

if [ "$1" != stage2 ]; then
  echo               # end SeaBIOS's "Booting from ROM.." line
  $bb --install -s /bin
  export PATH=/bin
  mount -t proc proc /proc
  mount -t sysfs sysfs /sys
  mount -t devtmpfs devtmpfs /dev
  kver=$(cat /etc/kver)

  while read -r m; do
    insmod "$m" || fail "insmod $m failed"
  done < /etc/modules.load

  # 9p2000.L; a large msize speeds up reading binaries; cache=loose is safe for a read-only
  # root that does not change during a test run.
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /lower \
    || fail "cannot mount the host root (9p tag hostroot)"
  mount -t tmpfs -o mode=0755 tmpfs /rw || fail "cannot mount tmpfs"
  mkdir -p /rw/upper /rw/work
  mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot \
    || fail "cannot mount the overlay root"
  # /tmp stays part of the overlay: a repository cloned under the host's /tmp (as CI may do)
  # is then visible in the guest at the same path; the guest's own writes there go to tmpfs.
  mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /newroot/run || fail "cannot mount /run"
  mkdir -p /newroot/run/vm/xchg
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 xchg /newroot/run/vm/xchg \
    || fail "cannot mount the exchange directory (9p tag xchg)"
  # vm.env (from run.sh): VM_MODDIR = host path of the unpacked kernel's lib/modules/<kver>
  . /newroot/run/vm/xchg/vm.env || fail "cannot read vm.env"
  [ -f "/newroot$VM_MODDIR/modules.dep" ] || fail "no modules.dep in $VM_MODDIR"
  mkdir -p "/newroot/lib/modules/$kver"
  mount --bind "/newroot$VM_MODDIR" "/newroot/lib/modules/$kver" || fail "cannot bind the modules"
  cp /bin/busybox /newroot/run/vm/busybox
  cp /init /newroot/run/vm/init
  mount --move /dev /newroot/dev
  mount --move /proc /newroot/proc
  mount --move /sys /newroot/sys
  exec switch_root /newroot /run/vm/busybox sh /run/vm/init stage2
  fail "switch_root failed"
fi

# --- stage 2: PID 1 in the overlay root ---------------------------------------------------------
$bb mkdir -p /dev/pts /dev/shm
$bb mount -t devpts -o gid=5,mode=0620,ptmxmode=0666 devpts /dev/pts
$bb mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
[ -e /dev/fd ] || $bb ln -s /proc/self/fd /dev/fd
[ -e /dev/stdin ] || $bb ln -s /proc/self/fd/0 /dev/stdin
[ -e /dev/stdout ] || $bb ln -s /proc/self/fd/1 /dev/stdout
[ -e /dev/stderr ] || $bb ln -s /proc/self/fd/2 /dev/stderr
$bb hostname ibeacon-vm
$bb ip link set lo up 2>/dev/null

rc=0
/bin/bash /run/vm/xchg/cmd.sh </dev/null || rc=$?
echo "$rc" > /run/vm/xchg/status
echo "VM-EXIT-STATUS=$rc"
halt_now
