"""`ibeacon scan` end to end: three Bumble-emulated iBeacons at once (different identities and
intervals) heard by the emulated controller `ibeacon` drives (tests/harness/bumble_harness.py);
the btsnoop capture of a live scan (and of a live calibration) replayed offline.
"""

from __future__ import annotations

import collections
import json
import re
import struct
import subprocess
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

import pytest

from support import run

U1 = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
U2 = 'F7826DA6-4FA2-4E98-8024-BC5B71E0893E'


class Beacon:
    def __init__(self, uuid: str, major: int, minor: int, power: int, interval_ms: int, address: str):
        self.uuid, self.major, self.minor = uuid, major, minor
        self.power, self.interval_ms, self.address = power, interval_ms, address

    @property
    def arg(self) -> str:
        return f'{self.uuid},{self.major},{self.minor},{self.power},{self.interval_ms},{self.address}'

    @property
    def identity(self) -> tuple[str, int, int]:
        return (self.uuid, self.major, self.minor)

    @property
    def advertising_data(self) -> str:
        """The AD bytes, assembled from Apple's iBeacon layout (independently of `ibeacon`)."""
        return (
            bytes([0x02, 0x01, 0x06])  # Flags: LE General Discoverable, BR/EDR not supported
            + bytes([0x1A, 0xFF])  # Manufacturer Specific Data, 26 octets
            + bytes([0x4C, 0x00])  # company 0x004C (Apple), little endian
            + bytes([0x02, 0x15])  # iBeacon type, 21 octets follow
            + uuidlib.UUID(self.uuid).bytes  # proximity UUID, big endian
            + struct.pack('>HHb', self.major, self.minor, self.power)  # major, minor BE; power
        ).hex()


# Lopsided majors/minors; the same UUID twice so the minor filter has work to do.
BEACONS = [
    Beacon(U1, 0x0102, 0x0304, -59, 100, 'D0:00:00:00:00:01'),
    Beacon(U1, 0x0102, 0x0305, -61, 200, 'D0:00:00:00:00:02'),
    Beacon(U2, 0x0A0B, 0x0C0D, -65, 400, 'D0:00:00:00:00:03'),
]
RSSI = -62  # what the receiver reports for every packet (constant model)
ADV_DELAY_MEAN_MS = 5.0  # advDelay is uniform in 0–10 ms (Vol 6 Part B 4.4.2.2.1)


@pytest.fixture
def three_beacons(harness_factory):
    return harness_factory(*[a for b in BEACONS for a in ('--beacon', b.arg)], '--rssi', f'constant:{RSSI}')


def scan_json(ibeacon_bin: Path, *args: str) -> list[dict[str, Any]]:
    proc = run(ibeacon_bin, 'scan', '--json', *args)
    assert proc.returncode == 0, f'scan failed ({proc.returncode}): {proc.stderr}'
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def identity(report: dict[str, Any]) -> tuple[str, int, int]:
    return (report['uuid'].upper(), report['major'], report['minor'])


def test_json_reports_every_beacon_at_its_rate(ibeacon_bin: Path, three_beacons) -> None:
    reports = scan_json(ibeacon_bin, '--device', three_beacons.device_spec, '--duration', '4')

    by_identity = {b.identity: b for b in BEACONS}
    counts: collections.Counter[tuple[str, int, int]] = collections.Counter()
    for r in reports:
        b = by_identity.get(identity(r))
        assert b is not None, f'a report from no emulated beacon: {r}'
        counts[b.identity] += 1
        assert r['address'] == b.address
        assert r['addressType'] == 'random'
        assert r['measuredPower'] == b.power
        assert r['rssi'] == RSSI
        assert r['data'] == b.advertising_data
        assert 0 <= r['t'] <= 4.5
    assert set(counts) == set(by_identity), counts
    # Reports per beacon follow its interval (plus the mean advDelay): 4 s at 100/200/400 ms
    # is about 38/19.5/9.9 reports.
    for b in BEACONS:
        expected = 4.0 / ((b.interval_ms + ADV_DELAY_MEAN_MS) / 1000)
        assert abs(counts[b.identity] - expected) <= max(2.0, 0.15 * expected), (b.interval_ms, counts)
    fast, mid, slow = (counts[b.identity] for b in BEACONS)
    assert 1.6 <= fast / mid <= 2.4, counts
    assert 3.0 <= fast / slow <= 5.0, counts
    # Report times increase.
    times = [r['t'] for r in reports]
    assert times == sorted(times)


@pytest.mark.parametrize(
    ('filters', 'wanted'),
    [
        pytest.param(('--uuid', U2), {2}, id='uuid'),
        pytest.param(('--uuid', U1.lower()), {0, 1}, id='uuid-lowercase'),
        pytest.param(('--major', str(0x0102), '--minor', str(0x0305)), {1}, id='major-minor'),
        pytest.param(('--minor', str(0x0304)), {0}, id='minor'),
        pytest.param(('--major', str(0x0A0B)), {2}, id='major'),
        pytest.param(('--uuid', U2, '--major', str(0x0102)), set(), id='nothing-matches'),
    ],
)
def test_filters(ibeacon_bin: Path, three_beacons, filters: tuple[str, ...], wanted: set[int]) -> None:
    reports = scan_json(ibeacon_bin, '--device', three_beacons.device_spec, '--duration', '2.5', *filters)

    seen = {identity(r) for r in reports}
    assert seen == {BEACONS[i].identity for i in wanted}
    for i in wanted:
        # Each wanted beacon is heard for the whole scan, not once.
        n = sum(1 for r in reports if identity(r) == BEACONS[i].identity)
        assert n >= 2.5 / ((BEACONS[i].interval_ms + 10) / 1000) - 2, (i, n)


def test_text_output_when_not_a_terminal(ibeacon_bin: Path, three_beacons) -> None:
    proc = run(ibeacon_bin, 'scan', '--device', three_beacons.device_spec, '--duration', '3.5')

    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert '\x1b' not in out, 'escape sequences on a pipe'
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines
    # The last line sums up: "N reports from M transmitter(s) in T s".
    summary = re.match(r'^(\d+) reports from (\d+) transmitter\(s\) in \d+\.\d s$', lines[-1])
    assert summary and int(summary.group(2)) == len(BEACONS), lines[-1]
    lines = lines[:-1]
    row = re.compile(
        r'^(?P<t>\d+\.\d) (?P<address>[0-9A-F:]{17}) (?P<uuid>[0-9A-F-]{36}) +(?P<major>\d+) +(?P<minor>\d+) '
        r'+(?P<rate>\d+\.\d) +(?P<rssi>-?\d+\.\d) +(?P<power>-?\d+) +(?P<distance>\d+\.\d\d) (?P<proximity>\w+)$'
    )
    rows = []
    for line in lines:
        m = row.match(line)
        assert m, f'not a plain row: {line!r}'
        rows.append(m.groupdict())
    for b in BEACONS:
        mine = [r for r in rows if r['address'] == b.address]
        # One line a second (3 ticks), plus the final table.
        assert len(mine) >= 3, (b.address, rows)
        for r in mine:
            assert (r['uuid'], int(r['major']), int(r['minor'])) == b.identity
            assert int(r['power']) == b.power
            assert float(r['rssi']) == RSSI
        # The last line's rate is near the beacon's rate.
        rate = float(mine[-1]['rate'])
        assert abs(rate - 1000 / (b.interval_ms + ADV_DELAY_MEAN_MS)) <= 0.3 * 1000 / b.interval_ms + 0.5, mine[-1]


def test_btsnoop_capture_replays_the_same_reports(ibeacon_bin: Path, three_beacons, tmp_path: Path) -> None:
    capture = tmp_path / 'scan.btsnoop'
    live = scan_json(
        ibeacon_bin, '--device', three_beacons.device_spec, '--duration', '4', '--btsnoop', str(capture)
    )
    assert capture.stat().st_size > 0
    three_beacons.close()  # offline from here on

    replay = scan_json(ibeacon_bin, '--device', f'btsnoop:{capture}')

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r['address'], identity(r), r['measuredPower'], r['rssi'], r['data'])

    assert {identity(r) for r in replay} == {b.identity for b in BEACONS}
    # The capture also holds the few reports that arrived between the end of the live scan
    # and Scan Enable off; nothing is lost and nothing invented.
    assert 0 <= len(replay) - len(live) <= 3, (len(live), len(replay))
    assert [key(r) for r in replay[: len(live)]] == [key(r) for r in live]


def test_calibrate_replays_a_recorded_calibration(
    ibeacon_bin: Path, harness_factory, tmp_path: Path
) -> None:
    h = harness_factory('--beacon', BEACONS[0].arg, '--rssi', 'gauss:-59,4', '--seed', '11')
    text = (
        '{\n  "uuid": "%s",\n  "major": %d,\n  "minor": %d,\n  "measuredPower": -70\n}\n'
        % BEACONS[0].identity
    )
    live_profile = tmp_path / 'live.json'
    live_profile.write_text(text)
    offline_profile = tmp_path / 'offline.json'
    offline_profile.write_text(text)
    capture = tmp_path / 'calibration.btsnoop'

    proc = run(
        ibeacon_bin, 'calibrate', '--profile', str(live_profile), '--device', h.device_spec, '--json',
        '--btsnoop', str(capture),
    )
    assert proc.returncode == 0, proc.stderr
    live = json.loads(proc.stdout)
    h.close()

    proc = run(
        ibeacon_bin, 'calibrate', '--profile', str(offline_profile), '--device', f'btsnoop:{capture}',
        '--dry-run', '--json',
    )
    assert proc.returncode == 0, proc.stderr
    offline = json.loads(proc.stdout)

    for k in ('samples', 'address', 'precisionReached'):
        assert offline[k] == live[k], (k, live, offline)
    # The capture stamps each packet as the transport reads it; the live estimator bins reports
    # into seconds when it handles them. On a loaded machine the two can differ by milliseconds,
    # enough to move a report near a second boundary into the neighbouring second (seen: live
    # -58.067 / replay -58.050 dBm). The same reports, a hundredth of a dB apart, not equal.
    assert abs(offline['estimate'] - live['estimate']) < 0.1, (live, offline)
    assert abs(offline['spread'] - live['spread']) < 0.2, (live, offline)
    assert abs(offline['interval95'] - live['interval95']) < 0.2, (live, offline)
    assert abs(offline['measuredPower'] - live['measuredPower']) <= 1, (live, offline)
    assert offline['written'] is False
    assert offline_profile.read_text() == text
    # Replayed as fast as it can be read, not in real time.
    assert offline['seconds'] < live['seconds']


@pytest.mark.parametrize('command, reason', [
    ('reset', 'reset by another host'),
    ('powercycle', 'power-up NOP'),
    ('hwerror', 'Hardware Error 0x01'),
])
def test_scan_keeps_going_through_a_controller_reset(ibeacon_bin: Path, three_beacons, command: str,
                                                     reason: str) -> None:
    """The receiver's controller is reset, power-cycled or reports a Hardware Error mid-scan:
    scanning stops there, and `ibeacon scan` says so and starts it again by itself."""
    proc = subprocess.Popen([str(ibeacon_bin), 'scan', '--json', '--device', three_beacons.device_spec,
                             '--duration', '6'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    first = json.loads(proc.stdout.readline())  # scanning has started
    time.sleep(1.0)
    three_beacons.send(command)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    reports = [first] + [json.loads(line) for line in out.splitlines() if line.strip()]
    assert reason in err and 'scanning again' in err and 'scanning resumed' in err, err
    # Without the restart nothing would be heard after the reset (about 1.5 s in); the last
    # 2 s still hold the 100 ms beacon's reports.
    late = [r for r in reports if r['t'] >= 4.0 and identity(r) == BEACONS[0].identity]
    assert len(late) >= 12, (len(late), err)
