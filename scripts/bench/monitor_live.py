#!/usr/bin/env python3
"""Live monitoring cost: a paced H4 controller over TCP feeds `ibeacon monitor` RATE advertising
reports per second (one report per LE Advertising Report event, the worst case for per-event
overhead) from BEACONS iBeacons (each its own address and identity, RSSI varying), for SECONDS.
The monitor watches REGIONS regions: one per beacon for the first REGIONS - 2, plus the UUID
region that holds them all and one region nobody advertises; with --min-rssi -90 every report
also updates the beacon's smoothed RSSI. The CPU time of the ibeacon process (all threads,
/proc/PID/task/*/schedstat) over the steady part gives its share of one core at that rate; the
peak RSS is VmHWM. The feeder answers every command with a successful Command Complete (no
extended features, so the scan is legacy), as scripts/bench/scan_live.py does.

usage: monitor_live.py IBEACON_BIN [RATE] [SECONDS] [BEACONS] [REGIONS]     prints one JSON object
"""
import json
import random
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from scan_live import answer_commands, cpu_ns, event  # the same paced H4 controller


def rss_kb(pid, field):
    return int(next(line for line in Path(f'/proc/{pid}/status').read_text().splitlines()
                    if line.startswith(field + ':')).split()[1])


def main():
    binary = sys.argv[1]
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20
    beacons = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    regions = int(sys.argv[5]) if len(sys.argv) > 5 else 52
    rng = random.Random(5)
    store = uuid.UUID(int=rng.getrandbits(128))
    payloads = [bytes([0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]) + store.bytes
                + struct.pack('>HHb', 12, i, -59) for i in range(beacons)]
    addresses = [struct.pack('<IH', rng.getrandbits(32), 0xC000 | i) for i in range(beacons)]
    events = [event(payloads[i % beacons], addresses[i % beacons], -60 - rng.randrange(25)) for i in range(beacons * 10)]
    nobody = ['--region', f'nobody={uuid.UUID(int=rng.getrandbits(128))}']
    # REGIONS 0: only the region nobody advertises (every report decoded, none matches): the
    # same path minus the region bookkeeping, for an A/B in the same minute.
    args = ['--region', f'store={store}', *nobody] if regions else nobody
    for i in range(max(0, regions - 2)):
        args += ['--region', f'dept{i}={store}:12:{i}']

    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(1)
    port = server.getsockname()[1]
    proc = subprocess.Popen([binary, 'monitor', '--device', f'tcp:127.0.0.1:{port}', '--json', '--exit-after', '5',
                             '--min-rssi', '-90', '--duration', str(seconds + 6), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    scanning = threading.Event()
    lines = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()

    threading.Thread(target=answer_commands, args=(conn, scanning), daemon=True).start()
    if not scanning.wait(10):
        raise SystemExit('ibeacon did not start scanning: ' + proc.stderr.read().decode()[-300:])
    idle_rss = rss_kb(proc.pid, 'VmRSS')
    # Pace in 1 ms slots; measure after 2 s of steady feeding.
    start = time.monotonic()
    sent = 0
    c0 = t0 = None
    i = 0
    while True:
        now = time.monotonic()
        elapsed = now - start
        if c0 is None and elapsed >= 2:
            c0, t0, sent0 = cpu_ns(proc.pid), now, sent
        if elapsed >= seconds + 2:
            c1, t1 = cpu_ns(proc.pid), now
            peak_kb = rss_kb(proc.pid, 'VmHWM')
            break
        due = int(elapsed * rate)
        if due > sent:
            conn.sendall(b''.join(events[(i + k) % len(events)] for k in range(due - sent)))
            i += due - sent
            sent = due
        time.sleep(0.001)
    proc.terminate()
    proc.wait(timeout=10)
    conn.close()
    cpu, wall, reports = c1 - c0, t1 - t0, sent - sent0
    kinds = [json.loads(line)['event'] for line in lines]
    print(json.dumps({'ratePerSecond': round(reports / wall), 'seconds': round(wall, 1), 'reports': reports,
                      'beacons': beacons, 'regions': regions, 'cpuMs': round(cpu / 1e6, 1),
                      'coreShare': f'{100 * cpu / 1e9 / wall:.2f} %',
                      'microsecondsPerReport': round(cpu / 1e3 / reports, 2), 'rssAtStartKB': idle_rss,
                      'peakRssKB': peak_kb, **{kind: kinds.count(kind)
                                               for kind in ('inside', 'outside', 'unknown', 'enter', 'exit')}}))


if __name__ == '__main__':
    main()
