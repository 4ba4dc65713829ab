#!/usr/bin/env bash
# `make demo`: advertise PROFILE to Bumble's emulated controller over H4/TCP, while an
# independent scanner (Bumble's host stack on a second emulated controller) prints what a
# phone would decode. DEMO_SECONDS (default 10) bounds it; Ctrl-C stops it early.
set -uo pipefail
cd "$(dirname "$0")/.."
profile=${1:-profiles/store12.json}
seconds=${DEMO_SECONDS:-10}
bin=${IBEACON_BIN:-.build/release/ibeacon}
exec .venv/bin/python scripts/demo.py "$bin" "$profile" "$seconds"
