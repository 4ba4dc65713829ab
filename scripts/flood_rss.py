#!/usr/bin/env python3
"""Peak memory of `ibeacon advertise` under an event flood (issue 11; RELIABILITY.md), or of
`ibeacon calibrate` under a flood of the calibrated beacon's reports (issue 23).

    python scripts/flood_rss.py BIN KIND SECONDS     KIND: report | malformed | hwerror | ibeacon

KIND ibeacon runs `calibrate --uuid … --dry-run --precision 0.001 --duration SECONDS+5` (the
precision is never reached: it keeps every report until the flood ends) instead of advertise.

Starts the Bumble harness, `BIN advertise` against it, has the harness flood KIND events for
SECONDS as fast as the host reads them, samples VmRSS every 0.2 s, then sends SIGTERM and
prints one line: events sent, VmRSS at the start and peak, exit status and time to exit,
stderr line count."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))

from conftest import Harness  # noqa: E402
from support import (  # noqa: E402
    BEACON_UUID, MAJOR, MINOR, start_advertising, stop_process, vm_rss_kib, write_profile)


def main() -> int:
    binary, kind, seconds = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    with Harness() as h, tempfile.TemporaryDirectory() as tmp:
        profile = write_profile(Path(tmp) / 'p.json')
        if kind == 'ibeacon':
            proc = subprocess.Popen(
                [str(binary), 'calibrate', '--device', h.device_spec, '--uuid', BEACON_UUID, '--major', str(MAJOR),
                 '--minor', str(MINOR), '--dry-run', '--precision', '0.001', '--duration', str(seconds + 5)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1)
        else:
            proc = start_advertising(binary, h, profile, scanner=False)
        start = vm_rss_kib(proc.pid)
        h.send(f'flood {kind} {seconds}')
        peak = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds and proc.poll() is None:
            peak = max(peak, vm_rss_kib(proc.pid))
            time.sleep(0.2)
        done = h.wait_for(lambda e: e['event'] == 'flood', timeout=30)
        rc, elapsed, _, err = stop_process(proc, signal.SIGTERM, timeout=10)
        print(f'{binary} {kind} {seconds:g} s: {done["events"]} events; VmRSS {start} KiB at start, '
              f'{peak} KiB peak; SIGTERM -> exit {rc} in {elapsed:.2f} s; {len(err.splitlines())} stderr lines')
    return 0


if __name__ == '__main__':
    sys.exit(main())
