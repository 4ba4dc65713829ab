"""`ibeacon monitor` end to end: Bumble-emulated beacons switched on and off while `ibeacon`
stays connected to its emulated controller (tests/harness/bumble_harness.py `beacon-on N` /
`beacon-off N`); a peer scanner on the same emulated radio timestamps every advertisement, so
enter and exit are measured from the first and last advertisement actually sent.
"""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import BEACON_UUID, CAPTURES, MAJOR, MINOR, Monitor, run, wait_until

OTHER_UUID = 'F7826DA6-4FA2-4E98-8024-BC5B71E0893E'
BEACON = f'{BEACON_UUID},{MAJOR},{MINOR},-59,100,D0:00:00:00:00:01'
BAKERY = f'bakery={BEACON_UUID}:{MAJOR}:{MINOR}'
STORE = f'store={BEACON_UUID}'
ELSEWHERE = f'elsewhere={OTHER_UUID}'


def test_enter_and_exit_follow_a_beacon_that_starts_and_stops(
    ibeacon_bin: Path, harness_factory, tmp_path: Path
) -> None:
    h = harness_factory('--beacon', BEACON, '--scanner', '--rssi', 'constant:-61')
    h.send('beacon-off 0')
    hook_log = tmp_path / 'hooks.txt'
    # The hook also writes to its stdout: that must go to stderr, not into the JSON.
    hook = ('sh -c \'echo "$IBEACON_EVENT|$IBEACON_REGION|$IBEACON_UUID|$IBEACON_MAJOR|$IBEACON_MINOR|'
            f'$IBEACON_RSSI|$IBEACON_T|$IBEACON_SILENT_S" >> {hook_log}; echo hook ran\'')
    m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--region', STORE,
                '--region', ELSEWHERE, '--exit-after', '2', '--exec', hook)
    try:
        # Nothing heard in the first 2 s: every region is reported outside, once.
        for region in ('bakery', 'store', 'elsewhere'):
            outside = m.wait_for('outside', region, timeout=8)
            assert 1.9 <= outside['t'] <= 2.6, outside
            assert outside['rssi'] is None
        on = h.send('beacon-on 0')['t']
        enter = m.wait_for('enter', 'bakery', timeout=4)
        first = h.adv_events(since=on, address='D0:00:00:00:00:01')[0]['t']
        assert enter['arrived'] - first <= 2.0, (enter, first)
        assert (enter['uuid'], enter['major'], enter['minor'], enter['rssi']) == (BEACON_UUID, MAJOR, MINOR, -61)
        assert enter['time'].endswith('Z') and 'T' in enter['time']
        m.wait_for('enter', 'store', timeout=1)
        # On the air for 4 s, twice the exit-after: no exit while it is heard.
        time.sleep(4)
        assert m.of('exit') == [], m.events
        off = h.send('beacon-off 0')['t']
        last = h.adv_events(address='D0:00:00:00:00:01')[-1]['t']
        assert last <= off
        exit_ = m.wait_for('exit', 'bakery', timeout=6)
        # Within exit-after + 2 s of the last advertisement, and not before exit-after.
        assert 2.0 - 0.3 <= exit_['arrived'] - last <= 2.0 + 2.0, (exit_, last)
        assert round(exit_['t'] - exit_['lastHeard'], 3) == 2.0
        assert (exit_['uuid'], exit_['major'], exit_['minor']) == (BEACON_UUID, MAJOR, MINOR)
        m.wait_for('exit', 'store', timeout=1)
        assert wait_until(lambda: len(hook_log.read_text().splitlines()) >= 7 if hook_log.exists() else False, 5)
    finally:
        rc = m.stop(signal.SIGTERM)
    assert rc == 0, m.stderr
    # The last word: each region's state as the run ends.
    finals = [e for e in m.events if e['event'] == 'state']
    assert [(e['region'], e['state'], e['final']) for e in finals] == [
        ('bakery', 'outside', True), ('store', 'outside', True), ('elsewhere', 'outside', True)], finals
    kinds = [(e['event'], e['region']) for e in m.events if e['event'] != 'state']
    assert sorted(kinds) == sorted([('outside', 'bakery'), ('outside', 'store'), ('outside', 'elsewhere'),
                                    ('enter', 'bakery'), ('enter', 'store'), ('exit', 'bakery'),
                                    ('exit', 'store')]), kinds
    times = [e['t'] for e in m.events]
    assert times == sorted(times)
    # Each event ran the hook once, in order, with the event in its environment.
    lines = hook_log.read_text().splitlines()
    # IBEACON_T is the event's time on the source's clock (the JSON t); IBEACON_SILENT_S how long
    # an exited region was silent.
    by_event = {(e['event'], e['region']): e for e in m.events}
    times = [line.split('|')[6] for line in lines]
    silences = [line.split('|')[7] for line in lines]
    lines = ['|'.join(line.split('|')[:6]) for line in lines]
    assert times == ['%.3f' % by_event[(line.split('|')[0], line.split('|')[1])]['t'] for line in lines], times
    assert silences == ['', '', '', '', '', '2.000', '2.000'], silences
    # For outside, no beacon caused it: the identity is the region's, RSSI empty. Events at the
    # same time come in the order the regions were given.
    assert lines == [
        f'outside|bakery|{BEACON_UUID}|{MAJOR}|{MINOR}|',
        f'outside|store|{BEACON_UUID}|||',
        f'outside|elsewhere|{OTHER_UUID}|||',
        f'enter|bakery|{BEACON_UUID}|{MAJOR}|{MINOR}|-61',
        f'enter|store|{BEACON_UUID}|{MAJOR}|{MINOR}|-61',
        f'exit|bakery|{BEACON_UUID}|{MAJOR}|{MINOR}|-61',
        f'exit|store|{BEACON_UUID}|{MAJOR}|{MINOR}|-61',
    ], lines
    assert 'hook ran' in m.stderr
    assert '0 inside, 3 outside, 2 enter, 2 exit, 0 unknown; hooks: 7 run, 0 failed, 0 dropped' in m.stderr


def test_noisy_rssi_at_the_threshold_does_not_flap(ibeacon_bin: Path, harness_factory) -> None:
    """RSSI scattering with σ 4 dB around --min-rssi itself, a 1 s exit-after: with the default
    hysteresis the region is entered once and stays; the same radio without hysteresis flaps
    (which shows the test exercises the edge)."""
    args = ('--beacon', BEACON, '--rssi', 'gauss:-70,4', '--seed', '3')
    steady, edge = harness_factory(*args), harness_factory(*args)
    common = ('--region', BAKERY, '--exit-after', '1', '--min-rssi', '-70', '--duration', '10')
    with_hysteresis = Monitor(ibeacon_bin, '--device', steady.device_spec, *common)
    without = Monitor(ibeacon_bin, '--device', edge.device_spec, *common, '--hysteresis', '0')
    rc1, rc2 = with_hysteresis.wait(timeout=30), without.wait(timeout=30)
    assert (rc1, rc2) == (0, 0), (with_hysteresis.stderr, without.stderr)
    # The first determination is a state (issue 24): inside, not enter.
    assert [e['event'] for e in with_hysteresis.events] == ['inside', 'state'], with_hysteresis.events
    assert with_hysteresis.events[0]['t'] < 3
    assert [e['event'] for e in without.events].count('exit') >= 1, without.events


def test_slow_and_failing_hooks_never_hold_up_the_scan(ibeacon_bin: Path, harness_factory) -> None:
    """The hook sleeps far past its timeout for `outside`, and fails for `enter`: events are still
    printed on time, the slow one is stopped at --exec-timeout, and both are logged."""
    h = harness_factory('--beacon', BEACON, '--scanner')
    h.send('beacon-off 0')
    hook = 'sh -c \'case "$IBEACON_EVENT" in outside) sleep 60;; enter) exit 3;; esac\''
    m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--exit-after', '1',
                '--exec', hook, '--exec-timeout', '3')
    try:
        m.wait_for('outside', 'bakery', timeout=8)
        # The outside hook is sleeping now; the beacon comes on.
        on = h.send('beacon-on 0')['t']
        enter = m.wait_for('enter', 'bakery', timeout=4)
        first = h.adv_events(since=on, address='D0:00:00:00:00:01')[0]['t']
        assert enter['arrived'] - first <= 2.0
        h.send('beacon-off 0')
        last = h.adv_events(address='D0:00:00:00:00:01')[-1]['t']
        exit_ = m.wait_for('exit', 'bakery', timeout=5)
        assert exit_['arrived'] - last <= 1.0 + 2.0
        assert wait_until(lambda: 'exited with status 3' in m.stderr, 8), m.stderr
    finally:
        rc = m.stop(signal.SIGINT)
    assert rc == 0, m.stderr
    assert ('hook for outside of bakery: `sh -c \'case "$IBEACON_EVENT" in outside) sleep 60;; enter) exit 3;; '
            'esac\'` took longer than 3 s (--exec-timeout) and was stopped (was killed by signal 15)') in m.stderr
    assert 'hook for enter of bakery failed: `sh -c' in m.stderr and 'exited with status 3' in m.stderr
    assert 'hooks: 3 run, 2 failed, 0 dropped' in m.stderr


@pytest.mark.parametrize('fault', ['reset', 'powercycle'])
def test_a_controller_reset_makes_the_region_unknown_never_exits_it(
    ibeacon_bin: Path, harness_factory, fault: str
) -> None:
    """The receiving controller reset (by another host, or powered off and on): while it is
    being recovered the region is unknown, with the reason; heard again it is inside as a
    state. Never an exit, never an enter. (Before issue 24: nothing at all was reported.)"""
    h = harness_factory('--beacon', BEACON)
    m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--exit-after', '2')
    try:
        m.wait_for('inside', 'bakery', timeout=5)
        h.send(fault)
        # Scanning restarts by itself; the beacon is heard again.
        assert wait_until(lambda: 'scanning resumed' in m.stderr, 5), m.stderr
        m.wait_for('inside', 'bakery', timeout=5, count=2)
        time.sleep(3)
    finally:
        rc = m.stop()
    assert rc == 0, m.stderr
    events = [e for e in m.events if e['event'] != 'state']
    assert [e['event'] for e in events] == ['inside', 'unknown', 'inside'], m.events
    unknown = events[1]
    assert unknown['state'] == 'unknown' and unknown['cause'] == 'reset', unknown
    assert unknown['reason'] in m.stderr
    assert [(e['state'], e['final']) for e in m.events if e['event'] == 'state'] == [('inside', True)]


def test_a_dropped_link_is_unknown_never_an_exit_and_a_restart_announces_no_enter(
    ibeacon_bin: Path, harness_factory
) -> None:
    """The tcp: link drops (exit 74, as before): the region is unknown, with the reason, never
    exited. The restarted monitor (as systemd would) reports the state inside, not an enter."""
    h = harness_factory('--beacon', BEACON)
    m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--exit-after', '2')
    m.wait_for('inside', 'bakery', timeout=5)
    h.send('disconnect')
    rc = m.wait(timeout=10)
    assert rc == 74, m.stderr
    events = [e['event'] for e in m.events]
    assert events == ['inside', 'unknown', 'state'], m.events
    assert m.events[1]['cause'] == 'link' and m.events[2]['state'] == 'unknown' and m.events[2]['final']
    again = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--exit-after', '2',
                    '--duration', '3')
    assert again.wait(timeout=15) == 0, again.stderr
    assert [e['event'] for e in again.events] == ['inside', 'state'], again.events


def test_the_watchdog_restarts_a_scan_that_hears_nothing(ibeacon_bin: Path, harness_factory) -> None:
    """Nothing at all on the air for --watchdog seconds: the scan is restarted (logged, and the
    controller sees the scan commands again), the region is unknown with the watchdog's reason
    rather than exited, and the beacon back on the air is inside as a state."""
    h = harness_factory('--beacon', BEACON)
    m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--exit-after', '4',
                '--watchdog', '2')
    try:
        m.wait_for('inside', 'bakery', timeout=5)
        h.send('beacon-off 0')
        unknown = m.wait_for('unknown', 'bakery', timeout=8)
        assert unknown['cause'] == 'watchdog', unknown
        assert 'no advertisement of any device for 2 s (--watchdog); scan restarted' == unknown['reason']
        assert wait_until(lambda: 'scanning resumed' in m.stderr, 5), m.stderr
        time.sleep(3)  # longer than the exit delay: still no exit while unknown
        h.send('beacon-on 0')
        m.wait_for('inside', 'bakery', timeout=5, count=2)
    finally:
        rc = m.stop()
    assert rc == 0, m.stderr
    events = [e['event'] for e in m.events if e['event'] != 'state']
    assert events == ['inside', 'unknown', 'inside'], m.events


@pytest.mark.parametrize('transport', [(), ('--pty',)], ids=['tcp', 'serial'])
def test_duration_ends_the_monitor(ibeacon_bin: Path, harness_factory, tmp_path: Path,
                                   transport: tuple[str, ...]) -> None:
    h = harness_factory('--beacon', BEACON, *transport)
    fds = tmp_path / 'fds.txt'
    started = time.monotonic()
    # The hook lists its open descriptors (stat only: listing them must not open one): stdin,
    # stdout, stderr and nothing of ibeacon's (the controller's socket, the --btsnoop file).
    code = ('import os, sys; fds = [f for f in range(1024) if os.path.exists("/proc/self/fd/%d" % f)]; '
            'open(sys.argv[1], "w").write(" ".join(map(str, fds)))')
    proc = subprocess.run([str(ibeacon_bin), 'monitor', '--device', h.device_spec, '--region', BAKERY,
                           '--duration', '1.5', '--btsnoop', str(tmp_path / 'c.btsnoop'),
                           '--exec', f"{sys.executable} -c '{code}' {fds}"], capture_output=True, text=True,
                          timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 6
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, lines
    # A readable line: time, event, region, who, RSSI; the first determination is a state.
    assert lines[0].endswith(f' inside  bakery: {BEACON_UUID} {MAJOR} {MINOR} at -59 dBm'), lines
    # Then the last word: the state as the run ends.
    assert ' final   bakery: inside since ' in lines[1], lines
    assert fds.read_text().split() == ['0', '1', '2']



def test_a_recorded_capture_gives_the_same_events_in_capture_time(
    ibeacon_bin: Path, harness_factory, tmp_path: Path
) -> None:
    """Monitored live with --btsnoop while the beacon goes off and on again; the capture read back
    (`--device btsnoop:FILE`) gives the same enter, exit, enter at the same times relative to the
    first report, at once rather than in real time, with no wall-clock time."""
    h = harness_factory('--beacon', BEACON)
    capture = tmp_path / 'monitor.btsnoop'
    region = ('--region', BAKERY, '--exit-after', '1.5')
    m = Monitor(ibeacon_bin, '--device', h.device_spec, *region, '--btsnoop', str(capture))
    try:
        m.wait_for('inside', 'bakery', timeout=5)
        time.sleep(1)
        h.send('beacon-off 0')
        m.wait_for('exit', 'bakery', timeout=5)
        time.sleep(0.5)
        h.send('beacon-on 0')
        m.wait_for('enter', 'bakery', timeout=5)
    finally:
        assert m.stop() == 0, m.stderr
    h.close()
    crossings = ('inside', 'enter', 'exit')
    live = [e for e in m.events if e['event'] in crossings]
    assert [e['event'] for e in live] == ['inside', 'exit', 'enter'], m.events

    started = time.monotonic()
    proc = subprocess.run([str(ibeacon_bin), 'monitor', '--json', '--device', f'btsnoop:{capture}', *region],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 2.0
    replay = [json.loads(line) for line in proc.stdout.splitlines()]
    # The capture ends with ibeacon's own LE Set Scan Enable (off): unknown from there on.
    assert replay[-1]['event'] == 'state' and replay[-1]['state'] == 'unknown', replay
    assert replay[-1]['cause'] == 'scan-disabled', replay
    replay = [e for e in replay if e['event'] in crossings]
    assert [e['event'] for e in replay] == ['inside', 'exit', 'enter'], proc.stdout
    for a, b in zip(live, replay):
        assert abs((a['t'] - live[0]['t']) - (b['t'] - replay[0]['t'])) < 0.1, (live, replay)
        assert (b['uuid'], b['major'], b['minor'], b['rssi']) == (a['uuid'], a['major'], a['minor'], a['rssi'])
        assert b['time'] is None




def capture_seconds(path: Path) -> float:
    """Seconds from the first advertising report (an H4 LE Meta event with subevent 0x02 or 0x0D)
    to the last record of a datalink-1002 btsnoop file, read here from the format (FIELD.md):
    the span of capture time the monitor sees."""
    data = path.read_bytes()
    assert data[:8] == b'btsnoop\0' and struct.unpack_from('>II', data, 8) == (1, 1002)
    offset, first, last = 16, None, None
    while offset + 24 <= len(data):
        _, included, _, _, timestamp = struct.unpack_from('>IIIIq', data, offset)
        packet = data[offset + 24:offset + 24 + included]
        offset += 24 + included
        if len(packet) < included:
            break
        if first is None and packet[:2] == b'\x04\x3e' and len(packet) > 3 and packet[3] in (0x02, 0x0D):
            first = timestamp
        last = timestamp
    assert first is not None and last is not None
    return (last - first) / 1e6


@pytest.mark.parametrize(('capture', 'region', 'exit_after'), [
    # A phone's log: one beacon heard every 1.3 s for 15 s, then the phone turns scanning off
    # (its own LE Set Scan Enable 0 at 16.1 s) and hears no device at all for minutes.
    ('mtoslalibu+ec521__docs_bt-logs_btsnoop_hci.log', '56DB0365-A001-4062-9E4D-499D3B8ECCF3:4096:14388', '30'),
    # Extended reports; a UUID region holding four beacons, heard twice about a minute apart,
    # scanning off (LE Set Extended Scan Enable 0) in between.
    ('wangdalian+btsnooper__data_btsnoop_hci.log', 'FDA50693-A4E2-4FB1-AFCF-C6EB07647825', '10'),
    # Full controller init; six reports, then scanning off and no device heard for 15 minutes.
    ('cnrd+yeelock__btsnoop_hci.log', 'FDA50693-A4E2-4FB1-AFCF-C6EB07647825:5:6', '10'),
])
def test_third_party_captures_report_no_exit_when_the_receiver_went_deaf(
    ibeacon_bin: Path, capture: str, region: str, exit_after: str
) -> None:
    """Real captures recorded by other people (support.CAPTURES, SOURCES.md). Before issue
    24 each of them reported an exit that was the receiver going deaf (the phone's own scan
    enable 0, or nothing of any device heard for minutes). Now: the first determination is the
    state inside, the regions go unknown with the capture's own reason, no exit, and the region
    nobody advertises is never entered."""
    path = CAPTURES / capture
    proc = run(ibeacon_bin, 'monitor', '--json', '--device', f'btsnoop:{path}', '--region', f'here={region}',
               '--region', f'nobody={OTHER_UUID}', '--exit-after', exit_after)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    here = [e for e in events if e['region'] == 'here' and e['event'] != 'state']
    assert here[0]['event'] == 'inside', here
    assert [e for e in events if e['event'] in ('exit', 'enter')] == [], events
    unknown = [e for e in here if e['event'] == 'unknown']
    assert unknown and unknown[0]['cause'] == 'scan-disabled', here
    assert 'Scan Enable turned scanning off' in unknown[0]['reason']
    assert all(e['event'] in ('outside', 'unknown', 'state') for e in events if e['region'] == 'nobody'), events
    finals = [e for e in events if e['event'] == 'state']
    assert [e['region'] for e in finals] == ['here', 'nobody'] and all(e['final'] for e in finals)
    assert finals[0]['t'] >= capture_seconds(path) - 0.25
    for e in events:
        assert e['time'] is None
