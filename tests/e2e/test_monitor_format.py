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


def scan_enable(enable: bool, extended: bool = False) -> bytes:
    """An H4 command the capture's host sent: LE Set Scan Enable (0x200C: enable, filter
    duplicates) or LE Set Extended Scan Enable (0x2042: enable, filter duplicates, duration,
    period)."""
    if extended:
        return bytes([0x01, 0x42, 0x20, 6, int(enable), 0, 0, 0, 0, 0])
    return bytes([0x01, 0x0C, 0x20, 2, int(enable), 0])


def capture(path: Path, records: list[tuple[int, bytes]]) -> None:
    out = bytearray(b'btsnoop\0' + struct.pack('>II', 1, 1002))
    start = 1_700_000_000_000_000 + EPOCH_DELTA_US
    for micros, packet in records:
        # Flags: bit 1 command/event; bit 0 set = received by the host (events), clear = sent.
        flags = 2 if packet[0] == 0x01 else 3
        out += struct.pack('>IIIIq', len(packet), len(packet), flags, 0, start + micros) + packet
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
    # Issue 24: the first determination is the state inside (not enter); outside says how long
    # was scanned; the run ends with each region's final state.
    assert monitor(ibeacon_bin, tmp_path) == [
        f't+0.063 s inside  here: {HERE} 7 8 at -60 dBm',
        't+1.250 s outside nobody: not heard in 1.3 s of scanning',
        f't+1.313 s exit    here: silent for 1.3 s; last heard {HERE} 7 8 at -60 dBm',
        f't+2.001 s enter   here: {HERE} 7 8 at -61 dBm',
        f't+3.251 s exit    here: silent for 1.3 s; last heard {HERE} 7 8 at -61 dBm',
        't+5.000 s final   here: outside since t+3.251 s; last heard at t+2.001 s',
        't+5.000 s final   nobody: outside since t+1.250 s',
    ]


def test_json_times_at_ties(ibeacon_bin: Path, tmp_path: Path) -> None:
    lines = monitor(ibeacon_bin, tmp_path, '--json')
    head = '"uuid":"%s","major":7,"minor":8' % HERE
    assert lines == [
        '{"event":"inside","state":"inside","region":"here",%s,"rssi":-60,"time":null,"t":0.063}' % head,
        '{"event":"outside","state":"outside","region":"nobody","uuid":"%s","major":null,"minor":null,"rssi":null,'
        '"time":null,"t":1.250}' % NOBODY,
        '{"event":"exit","state":"outside","region":"here",%s,"rssi":-60,"time":null,"t":1.313,"lastHeard":0.063,'
        '"silent":1.250}' % head,
        '{"event":"enter","state":"inside","region":"here",%s,"rssi":-61,"time":null,"t":2.001}' % head,
        '{"event":"exit","state":"outside","region":"here",%s,"rssi":-61,"time":null,"t":3.251,"lastHeard":2.001,'
        '"silent":1.250}' % head,
        '{"event":"state","state":"outside","region":"here",%s,"rssi":-61,"time":null,"t":5.000,"lastHeard":2.001,'
        '"since":3.251,"sinceTime":null,"final":true}' % head,
        '{"event":"state","state":"outside","region":"nobody","uuid":"%s","major":null,"minor":null,"rssi":null,'
        '"time":null,"t":5.000,"since":1.250,"sinceTime":null,"final":true}' % NOBODY,
    ]
    for line in lines:
        json.loads(line)


def events_of(ibeacon_bin: Path, path: Path, *args: str) -> list[dict]:
    result = run(ibeacon_bin, 'monitor', '--json', '--device', f'btsnoop:{path}', '--region', f'here={HERE}', *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_scanning_turned_off_in_a_capture_is_unknown_not_an_exit(ibeacon_bin: Path, tmp_path: Path) -> None:
    """A capture whose own host turns scanning off for a minute (longer than --exit-after) and
    on again: unknown from the off, no exit timer meanwhile, inside as a state once heard
    again. A second stretch of scanning without the beacon: judged outside only after a whole
    --exit-after of scanning from the enable, as a state. Legacy and extended commands alike."""
    for extended in (False, True):
        path = tmp_path / f'off-on-{extended}.btsnoop'
        records = [(i * 1_000_000, report(HERE, 7, 8, -60)) for i in range(6)]  # 0…5 s
        records += [(5_500_000, scan_enable(False, extended)), (60_000_000, scan_enable(True, extended))]
        records += [(61_000_000, report(HERE, 7, 8, -62)), (62_000_000, scan_enable(False, extended)),
                    (70_000_000, scan_enable(True, extended)), (95_000_000, report(ELSE, 1, 1, -70))]
        capture(path, records)
        events = events_of(ibeacon_bin, path, '--exit-after', '10')
        assert [(e['event'], e['state'], e['t']) for e in events] == [
            ('inside', 'inside', 0.0), ('unknown', 'unknown', 5.5), ('inside', 'inside', 61.0),
            ('unknown', 'unknown', 62.0), ('outside', 'outside', 80.0), ('state', 'outside', 95.0),
        ], events
        command = 'LE Set Extended Scan Enable' if extended else 'LE Set Scan Enable'
        assert events[1]['cause'] == 'scan-disabled'
        assert events[1]['reason'] == f"the capture's own {command} turned scanning off"
        assert events[-1]['final'] is True


def test_the_watchdog_in_capture_time(ibeacon_bin: Path, tmp_path: Path) -> None:
    """No advertisement of any device for --watchdog seconds of the capture: unknown (a
    receiver that stopped reporting), until something is heard again; then inside as a state.
    --watchdog 0 turns it off: the same capture then exits."""
    path = tmp_path / 'silent.btsnoop'
    records = [(i * 1_000_000, report(HERE, 7, 8, -60)) for i in range(6)]  # 0…5 s
    records += [(100_000_000, report(HERE, 7, 8, -61))]
    capture(path, records)
    events = events_of(ibeacon_bin, path, '--exit-after', '60', '--watchdog', '30')
    assert [(e['event'], e['t']) for e in events] == [
        ('inside', 0.0), ('unknown', 35.0), ('inside', 100.0), ('state', 100.0)], events
    assert events[1]['cause'] == 'watchdog' and '30 s (--watchdog)' in events[1]['reason']
    off = events_of(ibeacon_bin, path, '--exit-after', '60', '--watchdog', '0')
    assert [(e['event'], e['t']) for e in off] == [('inside', 0.0), ('exit', 65.0), ('enter', 100.0),
                                                   ('state', 100.0)], off
    assert off[1]['silent'] == 60.0


def test_state_lines_every_few_seconds_and_a_region_exit_delay(ibeacon_bin: Path, tmp_path: Path) -> None:
    """--state-every prints every region's state as a heartbeat (not a hook event); a region's
    own exit delay (@SECONDS) overrides --exit-after; a delay shorter than three observed
    advertising intervals is warned about."""
    path = tmp_path / 'states.btsnoop'
    capture(path, [(i * 2_000_000, report(HERE, 7, 8, -60)) for i in range(12)])  # every 2 s to 22 s
    result = run(ibeacon_bin, 'monitor', '--json', '--device', f'btsnoop:{path}', '--region', f'here={HERE}@5s',
                 '--region', f'nobody={NOBODY}', '--exit-after', '8', '--state-every', '10')
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e['event'], e['region'], e['state'], e['t'], e.get('final')) for e in events] == [
        ('inside', 'here', 'inside', 0.0, None), ('outside', 'nobody', 'outside', 8.0, None),
        ('state', 'here', 'inside', 10.0, False), ('state', 'nobody', 'outside', 10.0, False),
        ('state', 'here', 'inside', 20.0, False), ('state', 'nobody', 'outside', 20.0, False),
        ('state', 'here', 'inside', 22.0, True), ('state', 'nobody', 'outside', 22.0, True),
    ], events
    assert events[2]['since'] == 0.0 and events[3]['since'] == 8.0
    assert 'region here: exit delay 5.0 s is shorter than 3 advertising intervals' in result.stderr
