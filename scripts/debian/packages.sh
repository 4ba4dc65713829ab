#!/bin/bash
# The one "install the missing Debian packages" helper, for the Makefile (`$(call apt_install,…)`:
# deps, test-deps, the deb and deb-boot targets), the VM targets (scripts/vm/deps.sh) and the
# packaging and fresh-machine scripts (need_host_packages in scripts/debian/root.sh).
#
#   scripts/debian/packages.sh [--no-recommends] [--for NAME] PACKAGE...
#
# Installed packages are left alone: with nothing missing it does nothing (no apt-get update) and
# exits 0. As root it installs what is missing (apt-get update, then apt-get install, waiting for
# another apt that holds the lock). Otherwise it prints every missing package and the one command
# that installs them, and exits 1:
#   missing Debian packages: tshark mosquitto
#   run: sudo apt-get install -y tshark mosquitto
# (scripts/fresh/run.sh checks that line.) --for NAME prefixes the other messages with NAME.
set -euo pipefail

recommends=() who=""
while [ $# -gt 0 ]; do
  case $1 in
  --no-recommends) recommends=(--no-install-recommends) ;;
  --for) who="$2: "; shift ;;
  --) shift; break ;;
  -*) echo "packages.sh: unknown option $1" >&2; exit 64 ;;
  *) break ;;
  esac
  shift
done

missing=()
for p in "$@"; do
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}"
  echo "run: sudo apt-get install -y ${missing[*]}"
  exit 1
fi

echo "${who}installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
for try in 1 2 3 4 5 6; do  # another apt on the machine may hold the lists' lock for a while
  if apt-get update -q </dev/null >/dev/null &&
    apt-get install -y -q -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=900 ${recommends[@]+"${recommends[@]}"} \
      "${missing[@]}" </dev/null >/dev/null; then
    exit 0
  fi
  echo "${who}apt-get failed (lock held?), retry $try in 20 s" >&2
  sleep 20
done
echo "${who}could not install ${missing[*]}" >&2
exit 1
