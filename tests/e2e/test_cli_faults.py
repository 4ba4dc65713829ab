"""End-to-end: `ibeacon advertise` when the controller refuses or ignores a setup command
(harness `--fail OPCODE=STATUS|none`), and when the H4 connection drops while advertising.

Names are the Core 5.4 specification's (Vol 4 Part E 7.3, 7.4, 7.8); statuses are Vol 1
Part F. Exit codes: 76 (EX_PROTOCOL) for a rejected command, 75 (EX_TEMPFAIL) for no answer.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from support import BEACON_UUID, MAJOR, MINOR, POWER, write_profile, wait_until

IDENTITY = {'uuid': BEACON_UUID, 'major': MAJOR, 'minor': MINOR, 'power': POWER}

EX_TEMPFAIL = 75
EX_PROTOCOL = 76

SPEC_NAMES = {
    0x0C03: 'Reset',  # 7.3.2
    0x0C01: 'Set Event Mask',  # 7.3.1
    0x2001: 'LE Set Event Mask',  # 7.8.1
    0x1009: 'Read BD_ADDR',  # 7.4.6
    0x2003: 'LE Read Local Supported Features',  # 7.8.3
    0x200A: 'LE Set Advertising Enable',  # 7.8.9
    0x2006: 'LE Set Advertising Parameters',  # 7.8.5
    0x2008: 'LE Set Advertising Data',  # 7.8.7
    0x2036: 'LE Set Extended Advertising Parameters',  # 7.8.53
    0x2037: 'LE Set Extended Advertising Data',  # 7.8.54
    0x2039: 'LE Set Extended Advertising Enable',  # 7.8.56
}
STATUS_NAMES = {
    0x0C: 'Command Disallowed (0x0C)',
    0x12: 'Invalid HCI Command Parameters (0x12)',
}
LEGACY_SETUP = [0x0C03, 0x0C01, 0x2001, 0x1009, 0x2003, 0x200A, 0x2006, 0x2008]
EXTENDED_SETUP = [0x2036, 0x2037, 0x2039]


def advertise_once(h, ibeacon_bin: Path, profile: Path, *extra: str, timeout: float = 30):
    started = time.monotonic()
    result = subprocess.run(
        [str(ibeacon_bin), 'advertise', '--device', h.device_spec, '--profile', str(profile), *extra],
        capture_output=True, text=True, timeout=timeout,
    )
    ended = time.monotonic()
    assert 0 <= result.returncode < 128, (result.returncode, result.stderr)
    assert 'Fatal error' not in result.stderr and 'internal error' not in result.stderr, result.stderr
    return result, started, ended


def assert_no_dut_advertising_after(h, ended: float, settle: float = 0.3, listen: float = 0.7) -> None:
    time.sleep(max(0.0, ended + settle + listen - time.monotonic()))
    late = h.adv_events(since=ended + settle, address=h.address)
    assert late == [], f'{len(late)} advertisements from the DUT after advertise exited'


def fault_cases() -> list:
    cases = []
    for op in LEGACY_SETUP:
        cases.append(pytest.param('legacy', op, 0x0C, id=f'legacy-0x{op:04X}=0x0C'))
    for op in EXTENDED_SETUP:
        cases.append(pytest.param('extended', op, 0x0C, id=f'extended-0x{op:04X}=0x0C'))
    for features, op in [('legacy', 0x1009), ('legacy', 0x2006), ('extended', 0x2037)]:
        cases.append(pytest.param(features, op, 0x12, id=f'{features}-0x{op:04X}=0x12'))
    return cases


@pytest.mark.parametrize('features, opcode, status', fault_cases())
def test_setup_command_rejected(harness_factory, ibeacon_bin, tmp_path, features, opcode, status):
    h = harness_factory('--scanner', '--features', features, '--fail', f'0x{opcode:04X}=0x{status:02X}')
    profile = write_profile(tmp_path / 'p.json')
    result, started, ended = advertise_once(h, ibeacon_bin, profile)
    assert result.returncode == EX_PROTOCOL, (result.returncode, result.stderr)
    assert ended - started < 15
    message = result.stderr
    assert f'{SPEC_NAMES[opcode]} (0x{opcode:04X})' in message, message
    assert STATUS_NAMES[status] in message, message
    assert result.stdout.strip() == '', 'no status line may be printed when advertising failed'
    assert_no_dut_advertising_after(h, ended)


@pytest.mark.parametrize(
    'features, opcode',
    [('legacy', 0x0C03), ('legacy', 0x200A), ('legacy', 0x2008), ('extended', 0x2039)],
    ids=lambda v: v if isinstance(v, str) else f'0x{v:04X}',
)
def test_setup_command_never_answered(harness_factory, ibeacon_bin, tmp_path, features, opcode):
    h = harness_factory('--scanner', '--features', features, '--fail', f'0x{opcode:04X}=none')
    profile = write_profile(tmp_path / 'p.json')
    result, started, ended = advertise_once(h, ibeacon_bin, profile, '--timeout', '0.5')
    assert result.returncode == EX_TEMPFAIL, (result.returncode, result.stderr)
    assert ended - started < 8, f'took {ended - started:.1f} s with --timeout 0.5'
    assert f'{SPEC_NAMES[opcode]} (0x{opcode:04X})' in result.stderr, result.stderr
    assert result.stdout.strip() == ''
    assert_no_dut_advertising_after(h, ended)


# -----------------------------------------------------------------------------
# Dropped connection
# -----------------------------------------------------------------------------
@pytest.fixture
def background(ibeacon_bin, tmp_path) -> Iterator[Callable[..., subprocess.Popen]]:
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        index = len(procs)
        out = open(tmp_path / f'bg{index}.stdout', 'w')
        err = open(tmp_path / f'bg{index}.stderr', 'w')
        proc = subprocess.Popen([str(ibeacon_bin), *args], stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        out.close()
        err.close()
        proc.stdout_path = tmp_path / f'bg{index}.stdout'  # type: ignore[attr-defined]
        proc.stderr_path = tmp_path / f'bg{index}.stderr'  # type: ignore[attr-defined]
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def text(path: Path) -> str:
    return path.read_text(errors='replace')


@pytest.mark.parametrize('transport', ['tcp', 'pty'])
def test_dropped_connection_reconnects_and_resumes(harness_factory, background, tmp_path, transport):
    if transport == 'tcp':
        h = harness_factory('--scanner', '--trace')
        device = h.device_spec
    else:
        # The symlink follows the pty the harness re-opens after "disconnect".
        link = tmp_path / 'dut-tty'
        h = harness_factory('--scanner', '--trace', '--pty', str(link))
        device = f'serial:{link}'
    profile = write_profile(tmp_path / 'p.json')
    proc = background('advertise', '--device', device, '--profile', str(profile))
    started = time.monotonic()
    assert wait_until(lambda: text(proc.stdout_path).strip() or proc.poll() is not None, 15)
    assert proc.poll() is None, text(proc.stderr_path)
    h.wait_for(lambda e: e['event'] == 'adv' and e['address'] == h.address and e['t'] > started, timeout=5)
    connects_before = len([e for e in h.events('client') if e['state'] == 'connected'])

    h.send('disconnect')
    # While the host is away the controller loses its state, so advertising can only come
    # back if ibeacon reconnects and programs it again.
    h.send('reset')
    reset_at = time.monotonic()

    h.wait_for(lambda e: e['event'] == 'client' and e['state'] == 'connected', timeout=10,
               start=_index_after_connects(h, connects_before))
    first = h.wait_for(
        lambda e: e['event'] == 'adv' and e['address'] == h.address and e['t'] > reset_at + 0.05, timeout=10)
    assert first['ibeacon'] == IDENTITY
    assert wait_until(lambda: 'lost' in text(proc.stderr_path), 3), text(proc.stderr_path)
    assert proc.poll() is None, text(proc.stderr_path)

    # The new connection re-programmed the controller (enable sent after the reconnect).
    events = h.events()
    reconnect_index = _index_after_connects(h, connects_before)
    enables = [
        e for e in events[reconnect_index:]
        if e.get('event') == 'hci' and e['dir'] == 'in' and e.get('opcode') in ('0x200A', '0x2039')
        and e.get('data', '').startswith('01')
    ]
    assert enables, 'no advertising enable after reconnecting'

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=3) == 0, text(proc.stderr_path)


def _index_after_connects(h, count: int) -> int:
    """Index just past the count-th 'client connected' event."""
    seen = 0
    for index, event in enumerate(h.events()):
        if event.get('event') == 'client' and event.get('state') == 'connected':
            seen += 1
            if seen == count:
                return index + 1
    return 0
