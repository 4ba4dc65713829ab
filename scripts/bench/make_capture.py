#!/usr/bin/env python3
"""Writes a large btsnoop capture of a busy scan for the decoding benchmark.

The capture looks like what `ibeacon scan --btsnoop` records: the commands that start a
legacy scan with their Command Complete events, then LE Advertising Report events carrying
1-3 reports each (Num_Reports > 1 exercises the multi-report path), a mix of iBeacons
(20 identities) and other advertisements (names, service data, junk manufacturer data).

With --reports-only it writes no commands at all, only advertising report events, until the
capture holds exactly REPORTS reports (a log that starts mid-scan, like most phone logs): what
`make bench-decode` reads through `ibeacon scan --device btsnoop:FILE --json`. --size-mb writes
events until the file reaches that size instead (the memory benchmark).

With --one-beacon every report is the first iBeacon (UUID printed on stderr, major 12, minor 0)
from one address, one report per event: what `calibrate --dry-run` keeps every sample of (the
calibrate memory benchmark, issue 23).

usage: make_capture.py OUT.btsnoop [EVENTS]
       make_capture.py --reports-only OUT.btsnoop REPORTS
       make_capture.py --reports-only [--one-beacon] --size-mb MB OUT.btsnoop
"""
import random
import struct
import sys

EPOCH_DELTA_US = 0x00DCDDB30F2F8000  # btsnoop: microseconds from year 0 to 1970


def record(fh, packet: bytes, received: bool, is_cmd_evt: bool, t_us: int) -> None:
    flags = (1 if received else 0) | (2 if is_cmd_evt else 0)
    fh.write(struct.pack('>IIIIq', len(packet), len(packet), flags, 0, t_us + EPOCH_DELTA_US))
    fh.write(packet)


def command(opcode: int, params: bytes) -> bytes:
    return bytes([0x01]) + struct.pack('<HB', opcode, len(params)) + params


def command_complete(opcode: int, ret: bytes = b'\x00') -> bytes:
    body = bytes([1]) + struct.pack('<H', opcode) + ret
    return bytes([0x04, 0x0E, len(body)]) + body


def ibeacon(uuid: bytes, major: int, minor: int, power: int) -> bytes:
    return (bytes([0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]) + uuid
            + struct.pack('>HHb', major, minor, power))


def main() -> None:
    args = sys.argv[1:]
    reports_only = '--reports-only' in args
    one_beacon = '--one-beacon' in args
    args = [a for a in args if a not in ('--reports-only', '--one-beacon')]
    size_mb = None
    if '--size-mb' in args:
        k = args.index('--size-mb')
        size_mb = float(args[k + 1])
        del args[k:k + 2]
    out = args[0]
    events = int(args[1]) if len(args) > 1 else 200_000
    rng = random.Random(12)
    uuids = [bytes(rng.getrandbits(8) for _ in range(16)) for _ in range(4)]
    payloads = [ibeacon(uuids[i % 4], 12, i, -59 - i % 5) for i in range(20)]
    payloads += [
        bytes([0x02, 0x01, 0x06, 0x09, 0x09]) + b'Speaker1',
        bytes([0x02, 0x01, 0x1A, 0x05, 0x16, 0x0F, 0x18, 0x55, 0x00]),
        bytes([0x02, 0x01, 0x06, 0x0B, 0xFF, 0x75, 0x00]) + bytes(rng.getrandbits(8) for _ in range(8)),
    ]
    addresses = [bytes(rng.getrandbits(8) for _ in range(5)) + bytes([0xC0 | i]) for i in range(len(payloads))]
    t = 1_700_000_000_000_000
    with open(out, 'wb') as fh:
        fh.write(b'btsnoop\0' + struct.pack('>II', 1, 1002))
        if one_beacon:
            sys.stderr.write(f'one beacon: {uuids[0].hex().upper()} major 12 minor 0\n')
            payloads, addresses = payloads[:1], addresses[:1]
        if reports_only:
            write_reports(fh, rng, payloads, addresses, t, reports=None if size_mb else events,
                          size=int(size_mb * 1_000_000) if size_mb else None)
            return
        for opcode, params in [
            (0x0C03, b''), (0x1009, b''), (0x2003, b''),
            (0x200C, b'\x00\x00'), (0x200B, b'\x00\x60\x00\x60\x00\x00\x00'), (0x200C, b'\x01\x00'),
        ]:
            record(fh, command(opcode, params), False, True, t)
            ret = b'\x00'
            if opcode == 0x1009:
                ret += bytes([0xF5, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0])
            elif opcode == 0x2003:
                ret += bytes(8)
            record(fh, command_complete(opcode, ret), True, True, t)
            t += 100
        for _ in range(events):
            n = rng.choice((1, 1, 2, 3))
            reports = b''
            for _ in range(n):
                i = rng.randrange(len(payloads))
                data = payloads[i]
                rssi = rng.randint(-90, -40) & 0xFF
                reports += bytes([0x03, 0x01]) + addresses[i] + bytes([len(data)]) + data + bytes([rssi])
            body = bytes([0x02, n]) + reports
            record(fh, bytes([0x04, 0x3E, len(body)]) + body, True, True, t)
            t += 300


def write_reports(fh, rng, payloads, addresses, t, reports, size) -> None:
    """LE Advertising Report events of 1-3 reports until `reports` reports or `size` bytes."""
    written = 0
    while (reports is not None and written < reports) or (size is not None and fh.tell() < size):
        n = rng.choice((1, 1, 2, 3)) if len(payloads) > 1 else 1
        if reports is not None:
            n = min(n, reports - written)
        body = bytes([0x02, n])
        for _ in range(n):
            i = rng.randrange(len(payloads))
            data = payloads[i]
            body += bytes([0x03, 0x01]) + addresses[i] + bytes([len(data)]) + data + bytes([rng.randint(-90, -40) & 0xFF])
        record(fh, bytes([0x04, 0x3E, len(body)]) + body, True, True, t)
        written += n
        t += 300


if __name__ == '__main__':
    main()
