#!/usr/bin/env python3
"""Live monitoring cost: a paced H4 controller over TCP feeds `ibeacon monitor` RATE advertising
reports per second (one report per LE Advertising Report event, the worst case for per-event
overhead) from BEACONS iBeacons (each its own address and identity, RSSI varying), for SECONDS.
The monitor watches REGIONS regions: one per beacon for the first REGIONS - 2, plus the UUID
region that holds them all and one region nobody advertises; with --min-rssi -90 every report
also updates the beacon's smoothed RSSI. The CPU time of the ibeacon process (all threads,
/proc/PID/task/*/schedstat) over the steady part gives its share of one core at that rate; the
peak RSS is VmHWM. The feeder answers every command with a successful Command Complete (no
extended features, so the scan is legacy): scripts/bench/live_controller.py, as for scan_live.py.

usage: monitor_live.py IBEACON_BIN [RATE] [SECONDS] [BEACONS] [REGIONS]     prints one JSON object
"""
import json
import random
import struct
import subprocess
import sys
import threading
import uuid

from live_controller import event, ibeacon_payloads, measure, rss_kb, start  # the paced H4 controller


def main():
    binary = sys.argv[1]
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20
    beacons = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    regions = int(sys.argv[5]) if len(sys.argv) > 5 else 52
    rng = random.Random(5)
    store = uuid.UUID(int=rng.getrandbits(128))
    payloads = ibeacon_payloads(store, beacons)
    addresses = [struct.pack('<IH', rng.getrandbits(32), 0xC000 | i) for i in range(beacons)]
    events = [event(payloads[i % beacons], addresses[i % beacons], -60 - rng.randrange(25)) for i in range(beacons * 10)]
    nobody = ['--region', f'nobody={uuid.UUID(int=rng.getrandbits(128))}']
    # REGIONS 0: only the region nobody advertises (every report decoded, none matches): the
    # same path minus the region bookkeeping, for an A/B in the same minute.
    args = ['--region', f'store={store}', *nobody] if regions else nobody
    for i in range(max(0, regions - 2)):
        args += ['--region', f'dept{i}={store}:12:{i}']

    proc, conn = start(binary, 'monitor', '--json', '--exit-after', '5', '--min-rssi', '-90', '--duration',
                       str(seconds + 6), *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    idle_rss = rss_kb(proc.pid)

    def chunk(i, n):
        return b''.join(events[(i + k) % len(events)] for k in range(n))

    # Pace in 1 ms slots; measure after 2 s of steady feeding.
    cpu, wall, reports, peak_kb = measure(proc, conn, rate, seconds, chunk)
    kinds = [json.loads(line)['event'] for line in lines]
    print(json.dumps({'ratePerSecond': round(reports / wall), 'seconds': round(wall, 1), 'reports': reports,
                      'beacons': beacons, 'regions': regions, 'cpuMs': round(cpu / 1e6, 1),
                      'coreShare': f'{100 * cpu / 1e9 / wall:.2f} %',
                      'microsecondsPerReport': round(cpu / 1e3 / reports, 2), 'rssAtStartKB': idle_rss,
                      'peakRssKB': peak_kb, **{kind: kinds.count(kind)
                                               for kind in ('inside', 'outside', 'unknown', 'enter', 'exit')}}))


if __name__ == '__main__':
    main()
