#!/bin/bash
# Prepare (once, cached under .vm/) the guest kernel and initramfs for scripts/vm/run.sh.
#
#   .vm/dl/                      the downloaded linux-image .deb (deleted after unpacking)
#   .vm/kernel/<kver>/           the unpacked package; lib/modules/<kver> is depmod'ed and is
#                                bind-mounted onto the guest's /lib/modules/<kver> so modprobe
#                                works there (the kernel auto-loads ecb(aes)/cmac for Bluetooth)
#   .vm/vmlinux-<kver>           uncompressed kernel (boots ~3 s faster under TCG than bzImage)
#   .vm/initramfs-<kver>.cpio    busybox-static + 9p/virtio/overlay modules + scripts/vm/guest-init.sh
#   .vm/kernel.env               what run.sh boots (written last: its presence marks a complete cache);
#                                kernel-<VM_KERNEL>.env for another Debian release's kernel
#   .vm/apt/<suite>/             package lists of that release (apt's own client, a private state dir)
#
# Environment: VM_DIR (default <repo>/.vm), VM_KERNEL_PKG (default: what Debian's
# linux-image-amd64 depends on, e.g. linux-image-6.1.0-56-amd64; must be the generic flavour:
# the cloud flavour has no Bluetooth, 9p or overlay modules), VM_KERNEL (empty: this host's
# Debian release, 6.1 on Debian 12; 5.10: Debian 11's kernel; 6.12: Debian 13's; both from the
# Debian archive at VM_DEBIAN_MIRROR, default http://deb.debian.org/debian).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
VM_DIR=${VM_DIR:-$repo/.vm}
init_src=$here/guest-init.sh
VM_KERNEL=${VM_KERNEL:-}
case $VM_KERNEL in
  '') suite=; envfile=kernel.env;;
  5.10) suite=bullseye; envfile=kernel-5.10.env;;
  6.12) suite=trixie; envfile=kernel-6.12.env;;
  *) echo "vm-prepare: error: VM_KERNEL=$VM_KERNEL: known are 5.10 (Debian 11), 6.12 (Debian 13) or empty (this host's)" >&2; exit 64;;
esac

log() { echo "vm-prepare: $*" >&2; }
die() { echo "vm-prepare: error: $*" >&2; exit 1; }

mkdir -p "$VM_DIR"
exec 9>"$VM_DIR/.lock"
flock -w 600 9 || die "another prepare.sh holds $VM_DIR/.lock"

# --- cache check ---------------------------------------------------------------------------
if [ -s "$VM_DIR/$envfile" ]; then
  # shellcheck disable=SC1090
  . "$VM_DIR/$envfile"
  if [ -z "${VM_KERNEL_PKG:-}" ] || [ "$VM_KERNEL_PKG" = "$KPKG" ]; then
    if [ -f "$VM_DIR/$KERNEL" ] && [ -f "$VM_DIR/$INITRD" ] && [ -f "$VM_DIR/$MODDIR/modules.dep" ] \
       && [ "$VM_DIR/$INITRD" -nt "$init_src" ] && [ "$VM_DIR/$INITRD" -nt "${BASH_SOURCE[0]}" ]; then
      log "cached: $KPKG ($KERNEL, $INITRD)"
      exit 0
    fi
  fi
  rm -f "$VM_DIR/$envfile"
fi

# Another release's packages: its lists in a private state directory, so the host's apt
# configuration stays as it is.
apt_opts=()
if [ -n "$suite" ]; then
  adir=$VM_DIR/apt/$suite
  mkdir -p "$adir/lists/partial" "$adir/cache/archives/partial"
  echo "deb ${VM_DEBIAN_MIRROR:-http://deb.debian.org/debian} $suite main" > "$adir/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$adir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
            -o "Dir::State::Lists=$adir/lists" -o "Dir::Cache=$adir/cache" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
fi

apt_retry() {  # run an apt command; on failure refresh the package lists once and retry
  if ! "$@" </dev/null; then
    log "'$*' failed; running apt-get update and retrying"
    [ "$(id -u)" -eq 0 ] || die "apt-get update needs root"
    apt-get "${apt_opts[@]}" update -qq </dev/null
    "$@" </dev/null
  fi
}

# --- which kernel ----------------------------------------------------------------------------
pkg=${VM_KERNEL_PKG:-}
if [ -z "$pkg" ]; then
  # Reuse an already unpacked kernel rather than asking apt (keeps cached runs offline).
  for d in "$VM_DIR"/kernel/*/; do
    [ "$(cat "$d/.suite" 2>/dev/null)" = "$suite" ] || continue
    [ -f "$d/.pkg" ] && { pkg=$(cat "$d/.pkg"); break; }
  done
fi
if [ -z "$pkg" ]; then
  resolve() { apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9].*-amd64$/ { print $2; exit }'; }
  pkg=$(resolve || true)
  if [ -z "$pkg" ] && { [ "$(id -u)" -eq 0 ] || [ -n "$suite" ]; }; then
    log "no package lists for linux-image-amd64${suite:+ in $suite}; running apt-get update"
    apt-get "${apt_opts[@]}" update -qq </dev/null
    pkg=$(resolve || true)
  fi
  [ -n "$pkg" ] || die "cannot resolve the kernel package behind linux-image-amd64; set VM_KERNEL_PKG"
fi
case $pkg in
  *cloud*|*-rt-*) die "$pkg: need the generic amd64 flavour (bluetooth.ko, hci_vhci.ko, 9p, overlay)";;
esac
kver=${pkg#linux-image-}
kver=${kver%-unsigned}
kroot=$VM_DIR/kernel/$kver

# --- download and unpack -----------------------------------------------------------------------
if [ ! -f "$kroot/.pkg" ]; then
  mkdir -p "$VM_DIR/dl"
  deb=$(ls "$VM_DIR"/dl/"${pkg}"_*.deb 2>/dev/null | head -1 || true)
  if [ -z "$deb" ]; then
    log "downloading $pkg"
    t0=$SECONDS
    # apt warns when the _apt user cannot write the directory; the download still works.
    (cd "$VM_DIR/dl" && apt_retry apt-get "${apt_opts[@]}" download -q "$pkg" 2>&1 | { grep -v '^W: Download is performed unsandboxed' >&2 || true; }) \
      || die "apt-get download $pkg failed"
    deb=$(ls "$VM_DIR"/dl/"${pkg}"_*.deb 2>/dev/null | head -1 || true)
    [ -n "$deb" ] || die "apt-get download $pkg produced no .deb"
    log "downloaded $(basename "$deb") ($(du -h "$deb" | cut -f1)) in $((SECONDS - t0)) s"
  fi
  log "unpacking $(basename "$deb")"
  rm -rf "$kroot" "$kroot.tmp"
  mkdir -p "$kroot.tmp"
  dpkg-deb -x "$deb" "$kroot.tmp"
  # Debian 13 puts the modules under usr/lib/modules and compresses them (.ko.xz).
  mb=$kroot.tmp; [ -d "$mb/lib/modules/$kver" ] || mb=$kroot.tmp/usr
  [ -d "$mb/lib/modules/$kver" ] || die "$deb has no lib/modules/$kver"
  ls "$mb/lib/modules/$kver/kernel/drivers/bluetooth/hci_vhci.ko"* >/dev/null 2>&1 \
    || die "$pkg has no hci_vhci.ko (wrong flavour?)"
  depmod -b "$mb" "$kver"
  echo "$pkg" > "$kroot.tmp/.pkg"
  [ -z "$suite" ] || echo "$suite" > "$kroot.tmp/.suite"
  mv "$kroot.tmp" "$kroot"
  rm -f "$deb"
fi
modbase=$kroot; [ -d "$modbase/lib/modules/$kver" ] || modbase=$kroot/usr
moddir=${modbase#"$VM_DIR"/}/lib/modules/$kver
[ -f "$VM_DIR/$moddir/modules.dep" ] || depmod -b "$modbase" "$kver"

# --- uncompressed kernel ------------------------------------------------------------------------
vmlinuz=$kroot/boot/vmlinuz-$kver
[ -f "$vmlinuz" ] || die "missing $vmlinuz"
kernel=vmlinuz
if [ -f "$VM_DIR/vmlinux-$kver" ]; then
  kernel=vmlinux-$kver
else
  # As the kernel's scripts/extract-vmlinux does: find the compressed payload inside the
  # bzImage and decompress it. Debian's amd64 kernels use XZ (CONFIG_KERNEL_XZ); QEMU boots the
  # ELF vmlinux through its PVH entry point (CONFIG_PVH).
  for off in $(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | cut -d: -f1); do
    # (tail dies of SIGPIPE once xz has read its stream: judge by the output, not the status)
    tail -c +"$((off + 1))" "$vmlinuz" | xz -dc --single-stream > "$VM_DIR/vmlinux.tmp" 2>/dev/null || true
    if [ "$(head -c 4 "$VM_DIR/vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
      mv "$VM_DIR/vmlinux.tmp" "$VM_DIR/vmlinux-$kver"
      kernel=vmlinux-$kver
      break
    fi
  done
  rm -f "$VM_DIR/vmlinux.tmp"
  [ "$kernel" != vmlinuz ] || log "could not extract vmlinux; booting the bzImage"
fi
[ "$kernel" = vmlinuz ] && kernel=kernel/$kver/boot/vmlinuz-$kver

# --- initramfs --------------------------------------------------------------------------------
initrd=initramfs-$kver.cpio
log "building $initrd"
stage=$VM_DIR/initramfs.tmp
rm -rf "$stage"
mkdir -p "$stage"/{bin,sbin,dev,proc,sys,etc,lib/modules,lower,rw,newroot}
busybox=/bin/busybox
[ -x "$busybox" ] || die "busybox-static not installed ($busybox missing)"
# The initramfs has no libc: busybox must be static (ldd fails on static binaries).
! ldd "$busybox" >/dev/null 2>&1 || die "$busybox is dynamically linked; install busybox-static"
cp "$busybox" "$stage/bin/busybox"
install -m 0755 "$init_src" "$stage/init"
echo "$kver" > "$stage/etc/kver"
: > "$stage/etc/modules.load"
# virtio_pci: the 9p transport's PCI devices; 9pnet_virtio + 9p: the host's root and the
# exchange directory; overlay: a writable tmpfs layer over the read-only host root.
modprobe -d "$modbase" -S "$kver" --show-depends -a virtio_pci 9pnet_virtio 9p overlay \
  | while read -r kind path _; do
      [ "$kind" = insmod ] || continue        # "builtin X" lines need nothing
      name=$(basename "$path" .xz)
      grep -qx "/lib/modules/$name" "$stage/etc/modules.load" && continue
      # busybox insmod takes plain ELF modules only
      case $path in *.xz) xz -dc "$path" > "$stage/lib/modules/$name";; *) cp "$path" "$stage/lib/modules/$name";; esac
      echo "/lib/modules/$name" >> "$stage/etc/modules.load"
    done
[ -s "$stage/etc/modules.load" ] || die "no modules resolved for the initramfs"
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > "$VM_DIR/$initrd.tmp"
mv "$VM_DIR/$initrd.tmp" "$VM_DIR/$initrd"
rm -rf "$stage"

cat > "$VM_DIR/$envfile.tmp" <<ENV
# written by scripts/vm/prepare.sh; paths relative to this directory
KPKG=$pkg
KVER=$kver
KERNEL=$kernel
INITRD=$initrd
MODDIR=$moddir
ENV
mv "$VM_DIR/$envfile.tmp" "$VM_DIR/$envfile"
log "ready: $pkg, kernel $kernel, initramfs $(du -h "$VM_DIR/$initrd" | cut -f1)"
