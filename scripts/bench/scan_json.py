#!/usr/bin/env python3
"""Reading a capture end to end against Bumble, in the same run: `ibeacon scan --device
btsnoop:CAPTURE --json --reports` (the whole process: start-up, reading the file record by record,
decoding every event, one JSON line per report written to a pipe and counted here) against
Bumble's parser on the same packets (scripts/bench/bumble_decode.py: every event through
`HCI_Packet.from_bytes`, every report's data through `AdvertisingData.from_bytes`; packets
already in memory, so Bumble's file reading is not counted). Wall time and CPU time, best of REPEAT runs each (CPU time is what a shared machine's
load disturbs least).
Then, with --rss BIG_CAPTURE, the peak RSS of `ibeacon scan --json --reports` reading BIG_CAPTURE
(`/usr/bin/time -f %M`, the child's ru_maxrss).

usage: scan_json.py IBEACON_BIN CAPTURE [REPEAT] [--rss BIG_CAPTURE]     prints one JSON object
"""
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bumble_decode  # noqa: E402


def ibeacon_run(binary: str, capture: str) -> tuple[float, float, int]:
    """Wall time, CPU time (user + system of the child) and lines printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen([binary, 'scan', '--device', f'btsnoop:{capture}', '--json', '--reports'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = 0
    for chunk in iter(lambda: proc.stdout.read(1 << 20), b''):
        lines += chunk.count(b'\n')
    err = proc.stderr.read()
    proc.wait()
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f'scan failed ({proc.returncode}): {err.decode()[-500:]}')
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, lines


def peak_rss_mb(binary: str, capture: str) -> tuple[float, int]:
    proc = subprocess.run(['/usr/bin/time', '-f', '%M', binary, 'scan', '--device', f'btsnoop:{capture}', '--json',
                           '--reports'],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise SystemExit(f'scan failed ({proc.returncode}): {proc.stderr.decode()[-500:]}')
    kilobytes = int(proc.stderr.decode().strip().splitlines()[-1])
    return kilobytes / 1024, proc.stdout.count(b'\n')


def main() -> None:
    args = sys.argv[1:]
    big = None
    if '--rss' in args:
        k = args.index('--rss')
        big = args[k + 1]
        del args[k:k + 2]
    binary, capture = args[0], args[1]
    repeats = int(args[2]) if len(args) > 2 else 5
    runs = [ibeacon_run(binary, capture) for _ in range(repeats)]
    ours, lines = min(r[0] for r in runs), runs[0][2]
    ours_cpu = min(r[1] for r in runs)
    events = bumble_decode.load_events(capture)
    theirs = theirs_cpu = float('inf')
    for _ in range(max(1, repeats // 2)):
        start, start_cpu = time.perf_counter(), time.process_time()
        reports, beacons = bumble_decode.decode(events)
        theirs = min(theirs, time.perf_counter() - start)
        theirs_cpu = min(theirs_cpu, time.process_time() - start_cpu)
    # Without --all, scan prints the iBeacon reports: as many as Bumble finds.
    if beacons != lines:
        raise SystemExit(f'ibeacon printed {lines} iBeacon reports, Bumble found {beacons}')
    result = {'reports': reports, 'ibeaconReports': beacons, 'ibeaconScanJsonSeconds': round(ours, 4), 'bumbleSeconds': round(theirs, 3),
              'ibeaconNanosecondsPerReport': int(1e9 * ours / reports), 'speedup': round(theirs / ours, 1),
              'ibeaconCpuSeconds': round(ours_cpu, 4), 'bumbleCpuSeconds': round(theirs_cpu, 3),
              'cpuSpeedup': round(theirs_cpu / ours_cpu, 1)}
    if big:
        rss, big_lines = peak_rss_mb(binary, big)
        result.update({'bigCaptureMB': round(os.path.getsize(big) / 1e6, 1), 'bigCaptureReports': big_lines,
                       'peakRssMB': round(rss, 1)})
    print(json.dumps(result))


if __name__ == '__main__':
    main()
