#!/usr/bin/env bash
# `make run`: advertise PROFILE on DEVICE. Without a Bluetooth adapter (no kernel support, or
# no such adapter), say so and run the same advertising against the emulated controller.
set -uo pipefail
cd "$(dirname "$0")/.."
profile=${1:-profiles/store12.json}
device=${2:-hci0}
bin=${IBEACON_BIN:-.build/release/ibeacon}
if [[ $device == hci* ]]; then
    out=$("$bin" info --device "$device" 2>&1 >/dev/null)
    code=$?  # (inside `if ! …` this would be the negation's 0)
    if [[ $code != 0 ]]; then
        if [[ $code == 69 ]]; then
            echo "No Bluetooth adapter here: ${out#ibeacon: }"
            echo "Running the same advertising against the emulated controller instead (make demo)."
            echo
            make --no-print-directory venv >/dev/null || exit 1
            exec scripts/demo.sh "$profile"
        fi
    fi
fi
exec "$bin" advertise --device "$device" --profile "$profile"
