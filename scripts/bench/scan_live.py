#!/usr/bin/env python3
"""Live scanning cost: a paced H4 controller over TCP feeds `ibeacon scan` RATE advertising
reports per second (one report per LE Advertising Report event, the worst case for per-event
overhead; 20 iBeacon identities and 3 other kinds of advertisement), for SECONDS. The CPU time
of the ibeacon process (all threads, /proc/PID/task/*/schedstat) over the steady part gives
its share of one core at that rate. The feeder answers every command with a successful
Command Complete (address for Read BD_ADDR, no extended features so the scan is legacy).

With DISTINCT (a number), every report comes from a different address, drawn from DISTINCT
addresses in turn (a crowd of phones and tags with random addresses): the sighting table must
stay bounded (1,024 entries, the longest-silent evicted), and the peak RSS (VmHWM) is reported.

usage: scan_live.py IBEACON_BIN [RATE] [SECONDS] [DISTINCT]     prints one JSON object
"""
import json
import random
import struct
import subprocess
import sys

from live_controller import event, measure, start


def main():
    binary = sys.argv[1]
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20
    distinct = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    rng = random.Random(3)
    payloads = [bytes([0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]) + bytes(rng.getrandbits(8) for _ in range(16))
                + struct.pack('>HHb', 12, i, -59) for i in range(20)]
    payloads += [bytes([0x02, 0x01, 0x06, 0x09, 0x09]) + b'Speaker1', bytes([0x02, 0x01, 0x1A, 0x05, 0x16, 0x0F, 0x18, 0x55, 0x00]),
                 bytes([0x02, 0x01, 0x06, 0x0B, 0xFF, 0x75, 0x00]) + bytes(8)]
    addresses = [bytes(rng.getrandbits(8) for _ in range(5)) + bytes([0xC0 | i]) for i in range(len(payloads))]
    if distinct:
        # Static random addresses (top bits 11), all different; the events are built as they go.
        def address(n):
            return struct.pack('<IH', n & 0xFFFFFFFF, 0xC000 | (n >> 32) & 0x3FFF)

        events = None
    else:
        events = [event(payloads[i % len(payloads)], addresses[i % len(payloads)], -60 - i % 20) for i in range(1000)]

    proc, conn = start(binary, 'scan', '--all', '--duration', str(seconds + 6), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)

    def chunk(i, n):
        if events is None:
            return b''.join(event(payloads[(i + k) % len(payloads)], address((i + k) % distinct), -70)
                            for k in range(n))
        return b''.join(events[(i + k) % len(events)] for k in range(n))

    # Pace in 1 ms slots; measure after 2 s of steady feeding.
    cpu, wall, reports, peak_kb = measure(proc, conn, rate, seconds, chunk)
    print(json.dumps({'ratePerSecond': round(reports / wall), 'seconds': round(wall, 1), 'reports': reports,
                      'cpuMs': round(cpu / 1e6, 1), 'coreShare': f'{100 * cpu / 1e9 / wall:.2f} %',
                      'microsecondsPerReport': round(cpu / 1e3 / reports, 2),
                      'distinctAddresses': distinct or len(payloads), 'peakRssKB': peak_kb}))


if __name__ == '__main__':
    main()
