#!/usr/bin/env python3
"""Whole-pipeline cost of scanning: `ibeacon scan --device btsnoop:CAPTURE --all` replays the
capture through the real transport, controller client, decoder, filter and ranger (one
update per transmitter per second of capture time, printed as text lines). CPU time (user + system, from getrusage of the child) divided by the reports decoded
gives the cost per report, and from it the share of one core at 3,000 reports/s.

usage: scan_cpu.py IBEACON_BIN CAPTURE     prints one JSON object
"""
import json
import resource
import subprocess
import sys
import time


def main() -> None:
    binary, capture = sys.argv[1], sys.argv[2]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run([binary, 'scan', '--device', f'btsnoop:{capture}', '--all'],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f'scan failed ({proc.returncode}): {proc.stderr.decode()[-500:]}')
    # The last line: "N reports from B beacon(s) and O other transmitter(s) in T s".
    reports = int(proc.stdout.decode().strip().splitlines()[-1].split()[0])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    per_report = cpu / max(reports, 1)
    print(json.dumps({'reports': reports, 'cpuSeconds': round(cpu, 3), 'wallSeconds': round(wall, 3),
                      'microsecondsPerReport': round(per_report * 1e6, 2),
                      'coreShareAt3000PerSecond': f'{per_report * 3000 * 100:.2f} %',
                      'peakRssMB': round(after.ru_maxrss / 1024, 1)}))


if __name__ == '__main__':
    main()
