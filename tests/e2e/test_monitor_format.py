"""How `ibeacon monitor` spells its times, pinned on a capture whose times hit rounding ties:
0.0625 s and 1.3125 s are exact binary ties at 3 decimals, 1.25 s an exact tie at 1 decimal,
and 2.0005 s a decimal tie stored slightly below it. Capture time has no wall clock, so the text
lines start `t+SECONDS s` and the JSON `time` is null.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from support import run

EPOCH_DELTA_US = 0x00DCDDB30F2F8000
HERE = '2F234454-CF6D-4A0F-ADF2-F4911BA9FFA6'
NOBODY = 'F7826DA6-4FA2-4E98-8024-BC5B71E0893E'
ELSE = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'


def report(uuid: str, major: int, minor: int, rssi: int) -> bytes:
    """An H4 LE Advertising Report event: one legacy report of an iBeacon (Apple 4C 00, 02 15)."""
    data = bytes([2, 1, 6, 26, 0xFF, 0x4C, 0x00, 0x02, 0x15]) + bytes.fromhex(uuid.replace('-', ''))
    data += struct.pack('>HHb', major, minor, -59)
    params = bytes([0x02, 1, 3, 1]) + bytes([1, 2, 3, 4, 5, 6]) + bytes([len(data)]) + data + struct.pack('b', rssi)
    return bytes([0x04, 0x3E, len(params)]) + params


def capture(path: Path, records: list[tuple[int, bytes]]) -> None:
    out = bytearray(b'btsnoop\0' + struct.pack('>II', 1, 1002))
    start = 1_700_000_000_000_000 + EPOCH_DELTA_US
    for micros, packet in records:
        out += struct.pack('>IIIIq', len(packet), len(packet), 3, 0, start + micros) + packet
    path.write_bytes(bytes(out))


def monitor(ibeacon_bin: Path, tmp_path: Path, *extra: str) -> list[str]:
    path = tmp_path / 'ties.btsnoop'
    capture(path, [
        (0, report(ELSE, 1, 1, -70)),  # capture time starts at the first report
        (62_500, report(HERE, 7, 8, -60)),  # enter at 0.0625
        (2_000_500, report(HERE, 7, 8, -61)),  # enter again at 2.0005
        (5_000_000, report(ELSE, 1, 1, -70)),
    ])
    result = run(ibeacon_bin, 'monitor', '--device', f'btsnoop:{path}', '--region', f'here={HERE}',
                 '--region', f'nobody={NOBODY}', '--exit-after', '1.25', *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_text_times_at_ties(ibeacon_bin: Path, tmp_path: Path) -> None:
    assert monitor(ibeacon_bin, tmp_path) == [
        f't+0.063 s enter   here: {HERE} 7 8 at -60 dBm',
        't+1.250 s outside nobody: not heard in the first 1.3 s',
        f't+1.313 s exit    here: silent for 1.3 s; last heard {HERE} 7 8 at -60 dBm',
        f't+2.001 s enter   here: {HERE} 7 8 at -61 dBm',
        f't+3.251 s exit    here: silent for 1.3 s; last heard {HERE} 7 8 at -61 dBm',
    ]


def test_json_times_at_ties(ibeacon_bin: Path, tmp_path: Path) -> None:
    lines = monitor(ibeacon_bin, tmp_path, '--json')
    head = '"uuid":"%s","major":7,"minor":8' % HERE
    assert lines == [
        '{"event":"enter","region":"here",%s,"rssi":-60,"time":null,"t":0.063}' % head,
        '{"event":"outside","region":"nobody","uuid":"%s","major":null,"minor":null,"rssi":null,"time":null,'
        '"t":1.250}' % NOBODY,
        '{"event":"exit","region":"here",%s,"rssi":-60,"time":null,"t":1.313,"lastHeard":0.063}' % head,
        '{"event":"enter","region":"here",%s,"rssi":-61,"time":null,"t":2.001}' % head,
        '{"event":"exit","region":"here",%s,"rssi":-61,"time":null,"t":3.251,"lastHeard":2.001}' % head,
    ]
    for line in lines:
        json.loads(line)
