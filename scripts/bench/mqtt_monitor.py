#!/usr/bin/env python3
"""MQTT publishing cost: `ibeacon monitor --mqtt` with REGIONS regions (one per beacon) fed by the
paced H4-over-TCP controller of live_controller.py, in cycles: all beacons on the air for ON seconds
(RATE reports/s), then silent for OFF seconds (longer than --exit-after 2), so every cycle is
REGIONS enter and REGIONS exit events, each a state change (retained) and an event (not retained).
A real mosquitto on a free loopback port (tests/mqtt_broker.py) takes them.

Phase 1, broker up, CYCLES cycles: event-to-broker latency (the monitor's stdout line to the
same event arriving at a mosquitto_sub subscriber, both on time.monotonic()), CPU share and RSS.
Phase 2, broker frozen with SIGSTOP for DOWN seconds (it accepts TCP connections and answers
nothing: the worst kind of "down"), cycles going on: RSS sampled every 5 s (flat means bounded)
and the CPU share. Phase 3, SIGCONT: seconds until the retained store holds every region's
current state again, and the events the monitor says it dropped.

usage: mqtt_monitor.py IBEACON_BIN [REGIONS] [DOWN_SECONDS] [CYCLES]      prints one JSON object
"""
import json
import os
import random
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'tests'))
from mqtt_broker import Broker  # noqa: E402
from live_controller import cpu_ns, event, ibeacon_payloads, pace, rss_kb, start  # noqa: E402

RATE, ON, OFF, EXIT_AFTER = 1000, 3.0, 4.0, 2


def main():
    binary = sys.argv[1]
    regions = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    down = float(sys.argv[3]) if len(sys.argv) > 3 else 600
    cycles = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    rng = random.Random(7)
    store = uuid.UUID(int=rng.getrandbits(128))
    payloads = ibeacon_payloads(store, regions)
    addresses = [struct.pack('<IH', rng.getrandbits(32), 0xC000 | i) for i in range(regions)]
    events = [event(payloads[i % regions], addresses[i % regions], -60 - rng.randrange(20))
              for i in range(regions * 5)]
    args = []
    for i in range(regions):
        args += ['--region', f'dept{i}={store}:12:{i}']

    tmp = Path(tempfile.mkdtemp(prefix='ibeacon-mqtt-bench-'))
    broker = Broker(tmp)
    sub = broker.subscribe('bench/box/event')
    proc, conn = start(binary, 'monitor', '--json', '--exit-after', str(EXIT_AFTER), '--mqtt', broker.url,
                       '--mqtt-base', 'bench/box', *args, stdout=subprocess.PIPE,
                       stderr=open(tmp / 'stderr', 'w'), text=True)
    printed = []  # (monotonic, line)

    def read():
        for line in proc.stdout:
            printed.append((time.monotonic(), line.strip()))
    threading.Thread(target=read, daemon=True).start()
    time.sleep(EXIT_AFTER + 1)  # the initial outside events

    i = 0

    def cycle(samples=None):
        nonlocal i
        i += pace(conn, RATE, ON, lambda first, n: b''.join(events[(first + k) % len(events)] for k in range(n)), i)
        time.sleep(OFF)
        if samples is not None:
            samples.append(rss_kb(proc.pid))

    # Phase 1: broker up.
    rss_up = [rss_kb(proc.pid)]
    c0, t0 = cpu_ns(proc.pid), time.monotonic()
    for _ in range(cycles):
        cycle(rss_up)
    c1, t1 = cpu_ns(proc.pid), time.monotonic()
    time.sleep(1)
    arrived = {}
    for _, _, payload, t in sub.all():
        arrived.setdefault(payload, t)
    latencies = [arrived[line] - t for t, line in printed if line in arrived]
    missing = sum(1 for _, line in printed if line not in arrived)

    # Phase 2: broker frozen.
    broker.proc.send_signal(signal.SIGSTOP)
    rss_down = [rss_kb(proc.pid)]
    c2, t2 = cpu_ns(proc.pid), time.monotonic()
    down_start = time.monotonic()
    while time.monotonic() - down_start < down:
        cycle(rss_down)
    c3, t3 = cpu_ns(proc.pid), time.monotonic()
    events_down = sum(1 for t, _ in printed if t >= down_start)

    # Phase 3: broker back; the retained picture must be the current one.
    current = {}
    for _, line in printed:
        e = json.loads(line)
        current[e['region']] = 'ON' if e['event'] == 'enter' else 'OFF'
    broker.proc.send_signal(signal.SIGCONT)
    back = time.monotonic()
    restored = None
    while time.monotonic() - back < 120:
        store_now = broker.retained('bench/box/region/+/state')
        if all(store_now.get(f'bench/box/region/{r}/state') == s for r, s in current.items()):
            restored = time.monotonic() - back
            break
        time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    stderr = (tmp / 'stderr').read_text()
    dropped = [line for line in stderr.splitlines() if 'dropped' in line]
    lost_lines = sum('retrying in the background' in line for line in stderr.splitlines())
    sub.close()
    broker.close()
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0] * 99
    print(json.dumps({
        'regions': regions, 'cyclesUp': cycles, 'eventsUp': len(latencies), 'eventsNotDelivered': missing,
        'latencyMs': {'median': round(1000 * statistics.median(latencies), 1), 'p95': round(1000 * q[94], 1),
                      'max': round(1000 * max(latencies), 1)},
        'coreShareUp': f'{100 * (c1 - c0) / 1e9 / (t1 - t0):.2f} %',
        'rssUpKB': [min(rss_up), max(rss_up)],
        'downSeconds': round(t3 - t2), 'eventsWhileDown': events_down,
        'coreShareDown': f'{100 * (c3 - c2) / 1e9 / (t3 - t2):.2f} %',
        'rssDownKB': {'first': rss_down[0], 'atQuarters': [rss_down[len(rss_down) * k // 4] for k in (1, 2, 3)],
                      'max': max(rss_down), 'last': rss_down[-1], 'samples': len(rss_down)},
        'secondsToRestoreRetained': None if restored is None else round(restored, 1),
        'outageLogLines': lost_lines, 'droppedLog': dropped[-1][-120:] if dropped else None,
    }))
    os.system(f'rm -rf {tmp}')


if __name__ == '__main__':
    main()
