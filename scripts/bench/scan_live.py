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
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path


def cpu_ns(pid):
    return sum(int((t / 'schedstat').read_text().split()[0]) for t in Path(f'/proc/{pid}/task').iterdir())


def event(payload, address, rssi):
    body = bytes([0x02, 1, 0x03, 0x01]) + address + bytes([len(payload)]) + payload + bytes([rssi & 0xFF])
    return bytes([0x04, 0x3E, len(body)]) + body


def answer_commands(conn, scanning):
    """Answers every HCI command on `conn` with a successful Command Complete (an address for
    Read BD_ADDR, no LE features so the scan is legacy); sets `scanning` at LE Set Scan Enable on."""
    buf = b''
    while True:
        data = conn.recv(4096)
        if not data:
            return
        buf += data
        while len(buf) >= 4 and len(buf) >= 4 + buf[3]:
            opcode, plen = struct.unpack_from('<HB', buf, 1)
            params = buf[4:4 + plen]
            buf = buf[4 + plen:]
            ret = b'\x00'
            if opcode == 0x1009:
                ret += bytes([0xF5, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0])
            elif opcode == 0x2003:
                ret += bytes(8)
            body = bytes([1]) + struct.pack('<H', opcode) + ret
            conn.sendall(bytes([0x04, 0x0E, len(body)]) + body)
            if opcode == 0x200C and params[:1] == b'\x01':
                scanning.set()


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

    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(1)
    port = server.getsockname()[1]
    proc = subprocess.Popen([binary, 'scan', '--device', f'tcp:127.0.0.1:{port}', '--all',
                             '--duration', str(seconds + 6)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    scanning = threading.Event()

    threading.Thread(target=answer_commands, args=(conn, scanning), daemon=True).start()
    if not scanning.wait(10):
        raise SystemExit('ibeacon did not start scanning: ' + proc.stderr.read().decode()[-300:])
    # Pace in 1 ms slots; start measuring after 2 s of steady feeding.
    start = time.monotonic()
    sent = 0
    measured = None
    c0 = t0 = None
    i = 0
    while True:
        now = time.monotonic()
        elapsed = now - start
        if c0 is None and elapsed >= 2:
            c0, t0, sent0 = cpu_ns(proc.pid), now, sent
        if elapsed >= seconds + 2:
            c1, t1 = cpu_ns(proc.pid), now
            peak_kb = int(next(line for line in Path(f'/proc/{proc.pid}/status').read_text().splitlines()
                               if line.startswith('VmHWM:')).split()[1])
            measured = (c1 - c0, t1 - t0, sent - sent0)
            break
        due = int(elapsed * rate)
        if due > sent:
            if events is None:
                chunk = b''.join(event(payloads[(i + k) % len(payloads)], address((i + k) % distinct), -70)
                                 for k in range(due - sent))
            else:
                chunk = b''.join(events[(i + k) % len(events)] for k in range(due - sent))
            i += due - sent
            conn.sendall(chunk)
            sent = due
        time.sleep(0.001)
    proc.terminate()
    proc.wait(timeout=10)
    conn.close()
    cpu, wall, reports = measured
    print(json.dumps({'ratePerSecond': round(reports / wall), 'seconds': round(wall, 1), 'reports': reports,
                      'cpuMs': round(cpu / 1e6, 1), 'coreShare': f'{100 * cpu / 1e9 / wall:.2f} %',
                      'microsecondsPerReport': round(cpu / 1e3 / reports, 2),
                      'distinctAddresses': distinct or len(payloads), 'peakRssKB': peak_kb}))


if __name__ == '__main__':
    main()
