#!/usr/bin/env bash
# Builds the libFuzzer targets (Swift with -sanitize=fuzzer,address) into .build-fuzz/:
# IBeaconCore is compiled once as a static library, then each Fuzz/<target>.swift links it.
# Usage: Fuzz/build.sh [TARGET...]   (default: every Fuzz/*.swift)
set -euo pipefail
cd "$(dirname "$0")/.."
out=.build-fuzz
mkdir -p "$out"
flags=(-sanitize=fuzzer,address -parse-as-library -O -g)
mapfile -t core < <(find Sources/IBeaconCore -name '*.swift' | sort)
stamp=$out/IBeaconCoreFuzz.stamp
if [ ! -f "$stamp" ] || [ -n "$(find Sources/IBeaconCore -name '*.swift' -newer "$stamp")" ]; then
    echo "fuzz: building IBeaconCore with the fuzzer and address sanitizer"
    swiftc "${flags[@]}" -module-name IBeaconCoreFuzz -emit-library -static -emit-module \
        -emit-module-path "$out/IBeaconCoreFuzz.swiftmodule" -o "$out/libIBeaconCoreFuzz.a" "${core[@]}"
    touch "$stamp"
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(cd Fuzz && ls *.swift | sed 's/\.swift$//'))
for t in "${targets[@]}"; do
    if [ ! -x "$out/$t" ] || [ "Fuzz/$t.swift" -nt "$out/$t" ] || [ "$stamp" -nt "$out/$t" ]; then
        echo "fuzz: building $t"
        swiftc "${flags[@]}" -I "$out" -L "$out" -lIBeaconCoreFuzz "Fuzz/$t.swift" -o "$out/$t" 2>&1 \
            | grep -v "Cannot export local symbol" || true
        [ -x "$out/$t" ] || { echo "fuzz: $t did not build" >&2; exit 1; }
    fi
done
