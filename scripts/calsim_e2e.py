#!/usr/bin/env python3
"""Calibration accuracy end to end: the RSSI models of `ibeacon-calsim` replayed through the
emulated radio (tests/harness/bumble_harness.py, `--rssi list:FILE`) and measured by the real
`ibeacon calibrate`, several runs at once (each mostly waits for advertisements).

    scripts/calsim_e2e.py --seeds 1-10 [--models gauss-4,fades-15%] [--jobs 8]
        [--ibeacon .build/debug/ibeacon] [--calsim .build/release/ibeacon-calsim]

Prints a Markdown table like `ibeacon-calsim`'s (BENCHMARKS.md, "Calibration accuracy"):
the truth is Apple's procedure on 10-minute lists of the same model (`ibeacon-calsim --truth`).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / 'tests' / 'harness' / 'bumble_harness.py'
UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
MODELS = ['gauss-2', 'gauss-4', 'gauss-6', 'shadow-3s+rayleigh', 'rician-k3', 'rician-k10', 'fades-15%',
          'fades-30%', 'channels', 'quantised', 'person-walking-by']


def truth(calsim: Path, model: str) -> float:
    out = subprocess.run([str(calsim), '--truth', model], capture_output=True, text=True, check=True).stdout
    return float(out.split()[0])


def dump(calsim: Path, model: str, seed: int, directory: Path, duration: float = 190) -> Path:
    path = directory / f'{model}-{seed}.txt'
    with open(path, 'w') as f:
        subprocess.run([str(calsim), '--dump', model, '--seed', str(seed), '--duration', str(duration)], stdout=f,
                       check=True)
    return path


def calibrate(ibeacon: Path, rssi_list: Path, seed: int, extra: list[str] | None = None) -> dict:
    """One `ibeacon calibrate --dry-run --json` against a fresh harness replaying `rssi_list`.
    Returns the JSON result plus "exit"."""
    harness = subprocess.Popen(
        [sys.executable, '-u', str(HARNESS), '--tcp', '127.0.0.1:0', '--rssi', f'list:{rssi_list}', '--seed',
         str(seed), '--beacon', f'{UUID},258,772,-59,100'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        assert harness.stdout is not None
        port = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = harness.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            if event.get('event') == 'ready':
                port = event['tcp']
                break
        if port is None:
            raise RuntimeError(f'harness did not start for {rssi_list}')
        r = subprocess.run([str(ibeacon), 'calibrate', '--device', f'tcp:{port}', '--uuid', UUID, '--major', '258',
                            '--minor', '772', '--dry-run', '--json', *(extra or [])],
                           capture_output=True, text=True, timeout=240)
        if r.returncode not in (0, 80, 81) or not r.stdout.strip():
            raise RuntimeError(f'{rssi_list}: exit {r.returncode}: {r.stderr}')
        result = json.loads(r.stdout)
        result['exit'] = r.returncode
        return result
    finally:
        try:
            harness.communicate('quit\n', timeout=5)
        except Exception:
            harness.kill()
            harness.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--seeds', default='1-5', help='FIRST-LAST')
    parser.add_argument('--models', default=','.join(MODELS))
    parser.add_argument('--jobs', type=int, default=8)
    parser.add_argument('--ibeacon', type=Path, default=Path(os.environ.get('IBEACON_BIN', ROOT / '.build/debug/ibeacon')))
    parser.add_argument('--calsim', type=Path, default=ROOT / '.build/release/ibeacon-calsim')
    args = parser.parse_args()
    first, _, last = args.seeds.partition('-')
    seeds = range(int(first), int(last or first) + 1)
    models = args.models.split(',')
    truths = {m: truth(args.calsim, m) for m in models}
    started = time.monotonic()
    results: dict[str, list[dict]] = {m: [] for m in models}
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = {}
        for seed in seeds:
            for m in models:
                path = dump(args.calsim, m, seed, Path(tmp))
                jobs[pool.submit(calibrate, args.ibeacon, path, seed)] = m
        for future in concurrent.futures.as_completed(jobs):
            results[jobs[future]].append(future.result())
    print('| model | truth (dBm) | runs | within 1 dB | coverage | precision reached | drift refusals | median s | min s |')
    print('|---|---|---|---|---|---|---|---|---|')
    covered = total = 0
    for m in models:
        rs = results[m]
        errors = [r['estimate'] - truths[m] for r in rs]
        cov = sum(abs(e) <= r['interval95'] for e, r in zip(errors, rs))
        covered += cov
        total += len(rs)
        n = len(rs)
        print(f"| {m} | {truths[m]:.2f} | {n} | {100 * sum(abs(e) <= 1 for e in errors) / n:.0f} % | "
              f"{100 * cov / n:.0f} % | {100 * sum(r['precisionReached'] for r in rs) / n:.0f} % | "
              f"{100 * sum(r['refused'] == 'drift' for r in rs) / n:.0f} % | "
              f"{statistics.median(r['seconds'] for r in rs):.1f} | {min(r['seconds'] for r in rs):.1f} |")
    print()
    print(f'pooled coverage {100 * covered / max(1, total):.1f} % over {total} runs through the emulated radio; '
          f'seeds {args.seeds}; {time.monotonic() - started:.0f} s wall')
    return 0


if __name__ == '__main__':
    sys.exit(main())
