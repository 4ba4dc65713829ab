#!/usr/bin/env python3
"""Advertising benchmarks against the Bumble emulated controller (tests/harness):

1. start-up: time from spawning `ibeacon advertise` to its status line (advertising enabled:
   the line is printed after LE Set Advertising Enable completed), median of RUNS runs;
2. idle CPU: CPU time the process uses over SECONDS of steady advertising (summed over all
   its threads from /proc/PID/task/*/schedstat, nanosecond resolution), measured from 2 s
   after the status line so start-up is excluded;
3. peak RSS: VmHWM from /proc/PID/status at the end of that run.

usage: advertise.py IBEACON_BIN [SECONDS] [RUNS]     prints one JSON object
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'tests' / 'e2e'))
from conftest import Harness  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def cpu_ns(pid: int) -> int:
    total = 0
    for task in Path(f'/proc/{pid}/task').iterdir():
        try:
            total += int((task / 'schedstat').read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def peak_rss_kb(pid: int) -> int:
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1])
    return -1


def start(binary: str, device: str) -> tuple[subprocess.Popen, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen([binary, 'advertise', '--device', device, '--profile', str(REPO / 'profiles' / 'store12.json')],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith('advertising'):
        proc.kill()
        raise SystemExit(f'no status line: {line!r} {proc.stderr.read()}')
    return proc, time.monotonic() - t0


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


def main() -> None:
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    with Harness('--tcp', '127.0.0.1:0', '--scanner') as h:
        startups = []
        for _ in range(runs):
            proc, dt = start(binary, h.device_spec)
            startups.append(dt)
            stop(proc)
        proc, _ = start(binary, h.device_spec)
        time.sleep(2)
        c0, t0 = cpu_ns(proc.pid), time.monotonic()
        adv0 = len(h.adv_events())
        time.sleep(seconds)
        c1, t1 = cpu_ns(proc.pid), time.monotonic()
        adv1 = len(h.adv_events())
        rss = peak_rss_kb(proc.pid)
        stop(proc)
    print(json.dumps({
        'startupMedianMs': round(statistics.median(startups) * 1000, 1),
        'startupMinMs': round(min(startups) * 1000, 1), 'startupMaxMs': round(max(startups) * 1000, 1), 'runs': runs,
        'steadySeconds': round(t1 - t0, 1), 'cpuMs': round((c1 - c0) / 1e6, 2),
        'advertisementsHeard': adv1 - adv0, 'peakRssMB': round(rss / 1024, 1),
    }))


if __name__ == '__main__':
    main()
