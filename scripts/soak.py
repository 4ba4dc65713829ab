#!/usr/bin/env python3
"""Advertising soak: `ibeacon advertise` against the Bumble emulated controller while the
controller is reset behind its back every INTERVAL seconds (cycling reset, power-cycle and
Hardware Error). After each fault the independent scanner must hear the beacon again within
2 s; the process's RSS is sampled after each recovery and must stay flat.

usage: soak.py IBEACON_BIN [SECONDS] [INTERVAL]      (default 3600 s, a fault every 60 s)
Prints a line per fault and a JSON summary; exits non-zero on any missed recovery or RSS growth
over 2 MB from the first to the last sample.
"""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))
from conftest import Harness  # noqa: E402


def rss_kb(pid: int) -> int:
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    return -1


def main() -> int:
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3600
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 60
    faults = ['reset', 'powercycle', 'hwerror']
    results = []
    with Harness('--tcp', '127.0.0.1:0', '--scanner') as h:
        proc = subprocess.Popen(
            [binary, 'advertise', '--device', h.device_spec, '--profile', str(REPO / 'profiles' / 'store12.json')],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        status = proc.stdout.readline()
        if not status.startswith('advertising'):
            print(f'no status line: {status!r}', file=sys.stderr)
            proc.kill()
            return 1
        start = time.monotonic()
        n = 0
        while time.monotonic() - start + interval <= seconds:
            time.sleep(interval)
            fault = faults[n % len(faults)]
            n += 1
            h.send(fault)
            t0 = time.monotonic()
            time.sleep(0.3)  # let the fault take effect before looking for the resumed beacon
            try:
                h.wait_for(lambda e: e['event'] == 'adv' and e.get('ibeacon') and e['t'] > t0 + 0.3, timeout=2.0)
                recovered = time.monotonic() - t0
            except TimeoutError:
                recovered = None
            alive = proc.poll() is None
            rss = rss_kb(proc.pid) if alive else -1
            results.append({'fault': fault, 'recoveredAfterS': recovered and round(recovered, 2), 'rssKB': rss, 'alive': alive})
            print(json.dumps(results[-1]), flush=True)
            if not alive:
                break
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
    missed = [r for r in results if r['recoveredAfterS'] is None or not r['alive']]
    rss = [r['rssKB'] for r in results if r['rssKB'] > 0]
    growth = (rss[-1] - rss[0]) if len(rss) >= 2 else 0
    summary = {'faults': len(results), 'missedRecoveries': len(missed),
               'worstRecoveryS': max((r['recoveredAfterS'] or 99) for r in results) if results else None,
               'rssFirstKB': rss[0] if rss else None, 'rssLastKB': rss[-1] if rss else None,
               'rssGrowthKB': growth, 'exitCode': code}
    print(json.dumps(summary))
    return 0 if results and not missed and growth < 2048 and code == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
