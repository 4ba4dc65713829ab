"""`scan --json --reports` (one object per report) spells every line exactly as Python's json module
spells the same values: a capture generated here with every RSSI octet (127: not available), every
measured power − RSSI difference (the distance and proximity come from a table of those), every
address type (unknown ones included), majors and minors of every digit count, data of every length
up to 31 (legacy) and 200 (extended) bytes, and times from 0 to over an hour. The expected lines are
computed here from what was written, independently of the Swift writer: a wrong digit, hex character
or rounding in any line fails the test.
"""

from __future__ import annotations

import json
import math
import random
import struct
import uuid
from pathlib import Path

from support import run

EPOCH_DELTA_US = 0x00DCDDB30F2F8000
ADDRESS_TYPES = {0: 'public', 1: 'random', 2: 'public identity', 3: 'random identity', 0xFF: 'anonymous'}


def rounded(x: float, places: int) -> float:
    """Swift's `(x * 10^places).rounded() / 10^places`: half away from zero."""
    scale = 10 ** places
    v = x * scale
    whole = math.floor(abs(v))
    whole += 1 if abs(v) - whole >= 0.5 else 0
    return math.copysign(whole, v) / scale + 0.0  # + 0.0: -0.0 prints as 0.0


def ibeacon_data(proximity: bytes, major: int, minor: int, power: int, extra: bytes = b'') -> bytes:
    """Flags, then Apple's manufacturer data: 4C 00, 02 15, UUID, major, minor (big-endian), power."""
    return bytes([2, 1, 6, 26, 0xFF, 0x4C, 0x00, 0x02, 0x15]) + proximity + struct.pack('>HHb', major, minor, power) + extra


def build(path: Path) -> list[str]:
    """Writes the capture; returns the lines `scan --json --reports --all` must print."""
    rng = random.Random(0x15C0)
    uuids = [uuid.UUID(int=rng.getrandbits(128)).bytes for _ in range(4)] + [bytes(16), b'\xff' * 16]
    reports = []  # (extended, address type, RSSI octet, measured power); then 240 non-iBeacons
    # Every RSSI octet, and every difference power − RSSI from −254 to 255.
    for i in range(256):
        power = (i * 37 + 11) % 256 - 128
        reports.append((i % 2 == 1, i, i, power))
    for diff in range(-254, 256):
        rssi = max(-128, -128 - diff) if diff < 0 else max(-128, min(126, 127 - diff))
        reports.append((diff % 2 == 0, rng.choice([0, 1, 2, 3, 0xFF, rng.randrange(256)]), rssi & 0xFF, rssi + diff))
    out = bytearray(b'btsnoop\0' + struct.pack('>II', 1, 1002))
    expected = []
    micros = 1_700_000_000_000_000 + EPOCH_DELTA_US
    start = None  # time is counted from the first report
    majors = [0, 9, 10, 99, 100, 999, 1000, 9999, 10000, 65535]
    for k in range(len(reports) + 240):
        if k >= len(reports):  # not iBeacons: every data length; bytes 0x20…0x3F never make one
            extended, address_type, rssi_octet = k % 2 == 0, rng.randrange(256), rng.randrange(256)
            data = bytes(rng.randrange(0x20, 0x40) for _ in range((k - len(reports)) % (201 if extended else 32)))
            beacon = None
        else:
            extended, address_type, rssi_octet, power = reports[k]
            proximity = uuids[k % len(uuids)]
            major, minor = majors[k % len(majors)], majors[(k // 3) % len(majors)]
            data = ibeacon_data(proximity, major, minor, power, b'\x00' * (k % 2))
            beacon = (proximity, major, minor, power)
        address = bytes(rng.randrange(256) for _ in range(6))
        if extended:
            params = bytes([0x0D, 1]) + struct.pack('<HB', 0x10, address_type) + address
            params += bytes([1, 0, 0xFF, 127, rssi_octet, 0, 0, 0]) + bytes(6) + bytes([len(data)]) + data
        else:
            params = bytes([0x02, 1, 3, address_type]) + address + bytes([len(data)]) + data + bytes([rssi_octet])
        packet = bytes([0x04, 0x3E, len(params)]) + params
        micros += rng.choice([0, 1, 499, 500, 501, 999, 1000, 1001, 123_457]) + (3_600_000_000 if k == 700 else 0)
        out += struct.pack('>IIIIq', len(packet), len(packet), 3, 0, micros) + packet
        start = micros if start is None else start
        rssi = None if rssi_octet == 127 else struct.unpack('b', bytes([rssi_octet]))[0]
        line = {
            't': rounded(rounded((micros - start) / 1e6, 3), 4),
            'address': ':'.join(f'{b:02X}' for b in reversed(address)),
            'addressType': ADDRESS_TYPES.get(address_type, f'unknown address type (0x{address_type:02X})'),
            'rssi': rssi,
        }
        if beacon:
            proximity, major, minor, power = beacon
            distance = None if rssi is None else 10 ** ((power - rssi) / 20)
            zone = 'unknown' if distance is None else 'immediate' if distance < 0.5 else 'near' if distance <= 3 else 'far'
            line.update({'uuid': str(uuid.UUID(bytes=proximity)).upper(), 'major': major, 'minor': minor,
                         'measuredPower': power, 'distance': None if distance is None else rounded(distance, 4),
                         'proximity': zone})
        else:
            line.update({'uuid': None, 'major': None, 'minor': None, 'measuredPower': None, 'distance': None,
                         'proximity': None})
        line['data'] = data.hex()
        expected.append(json.dumps(line, separators=(',', ':')))
    path.write_bytes(bytes(out))
    return expected


def test_every_line_is_spelled_as_json_spells_it(ibeacon_bin: Path, tmp_path: Path) -> None:
    capture = tmp_path / 'edges.btsnoop'
    expected = build(capture)
    result = run(ibeacon_bin, 'scan', '--device', f'btsnoop:{capture}', '--json', '--reports', '--all', timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(expected) == 1006
    for number, (got, want) in enumerate(zip(lines, expected), start=1):
        assert got == want, f'line {number}'
