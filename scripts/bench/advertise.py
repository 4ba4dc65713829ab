#!/usr/bin/env python3
"""Advertising benchmarks against the Bumble emulated controller (tests/harness):

1. start-up: time from spawning `ibeacon advertise` to its status line (advertising enabled:
   the line is printed after LE Set Advertising Enable completed), median of RUNS runs;
2. idle CPU: the CPU time of a run of 5 + SECONDS seconds minus that of a run of 5 seconds
   (user + system from wait4's rusage, microsecond resolution, all threads, including ones
   that ended), i.e. what SECONDS of steady advertising cost beyond start-up and shutdown;
   the median of 3 such pairs;
3. peak RSS: VmHWM from /proc/PID/status at the end of the long run.

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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'tests'))
from conftest import Harness  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


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
        def timed_run(duration: float) -> tuple[float, int, int]:
            proc = subprocess.Popen(
                [binary, 'advertise', '--device', h.device_spec, '--profile', str(REPO / 'profiles' / 'store12.json'),
                 '--duration', str(duration)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            adv0 = len(h.adv_events())
            time.sleep(duration - 0.5)
            rss = peak_rss_kb(proc.pid)
            _, status, usage = os.wait4(proc.pid, 0)
            if status != 0:
                raise SystemExit(f'advertise exited with {status}: {proc.stderr.read()}')
            return usage.ru_utime + usage.ru_stime, rss, len(h.adv_events()) - adv0

        diffs, rss, heard = [], 0, 0
        for _ in range(3):
            short_cpu, _, _ = timed_run(5)
            long_cpu, rss, heard = timed_run(5 + seconds)
            diffs.append(long_cpu - short_cpu)
    print(json.dumps({
        'startupMedianMs': round(statistics.median(startups) * 1000, 1),
        'startupMinMs': round(min(startups) * 1000, 1), 'startupMaxMs': round(max(startups) * 1000, 1), 'runs': runs,
        'steadySeconds': seconds, 'cpuMsMedian': round(statistics.median(diffs) * 1000, 2),
        'cpuMsAll': [round(d * 1000, 2) for d in diffs], 'advertisementsHeardInLongRun': heard,
        'peakRssMB': round(rss / 1024, 1),
    }))


if __name__ == '__main__':
    main()
