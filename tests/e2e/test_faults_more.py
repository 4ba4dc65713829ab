"""More fault injection through the emulated controller, for every command that talks to a
controller (info, advertise, scan, calibrate): garbage on the wire, a slow controller, an
answer that comes after the timeout, rejected scan commands. Each case checks the exit code,
that the message names what failed, that nothing crashed, and that no file was touched and no
advertising was left on.
"""
import json
import subprocess
import time
from pathlib import Path

import pytest

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'


def profile(tmp_path: Path) -> Path:
    p = tmp_path / 'p.json'
    p.write_text(json.dumps({'uuid': UUID, 'major': 258, 'minor': 772, 'measuredPower': -59, 'intervalMs': 100}) + '\n')
    return p


def run(ibeacon_bin, *args, timeout=30):
    r = subprocess.run([str(ibeacon_bin), *args], capture_output=True, text=True, timeout=timeout)
    assert 0 <= r.returncode < 128, f'crashed: {r.returncode} {r.stderr}'
    assert 'Fatal error' not in r.stderr and 'internal error' not in r.stderr, r.stderr
    return r


def test_garbage_bytes_are_an_io_error_not_a_hang(harness_factory, ibeacon_bin):
    # The 3rd answer is followed by junk starting with the invalid H4 type 0xFF.
    h = harness_factory('--garbage-after', '2')
    started = time.monotonic()
    r = run(ibeacon_bin, 'info', '--device', h.device_spec, '--timeout', '1')
    assert time.monotonic() - started < 10
    assert r.returncode == 74, (r.returncode, r.stderr)
    assert 'out of sync' in r.stderr, r.stderr


def test_garbage_while_setting_up_advertising_leaves_it_off(harness_factory, ibeacon_bin, tmp_path):
    h = harness_factory('--scanner', '--garbage-after', '6', '--features', 'legacy')
    r = run(ibeacon_bin, 'advertise', '--device', h.device_spec, '--profile', str(profile(tmp_path)), '--timeout', '1')
    assert r.returncode == 74, (r.returncode, r.stderr)
    assert 'out of sync' in r.stderr
    ended = time.monotonic()
    time.sleep(1.0)
    assert h.adv_events(since=ended + 0.3, address=h.address) == []


def test_a_slow_controller_still_works(harness_factory, ibeacon_bin, tmp_path):
    """Every command answered after 1 s (the default timeout is 2 s): info, advertise, scan and
    calibrate all work, only slowly."""
    h = harness_factory('--scanner', '--slow', '1000', '--beacon', f'{UUID},258,772,-59,100')
    r = run(ibeacon_bin, 'info', '--device', h.device_spec, '--json', timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)['address'] == h.address
    r = run(ibeacon_bin, 'advertise', '--device', h.device_spec, '--profile', str(profile(tmp_path)), '--duration', '2',
            timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('advertising'), r.stdout
    r = run(ibeacon_bin, 'scan', '--device', h.device_spec, '--json', '--duration', '2', timeout=60)
    assert r.returncode == 0, r.stderr
    assert any(json.loads(line)['major'] == 258 for line in r.stdout.splitlines()), r.stdout[-500:]
    r = run(ibeacon_bin, 'calibrate', '--device', h.device_spec, '--uuid', UUID, '--major', '258', '--minor', '772',
            '--dry-run', '--json', timeout=90)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)['samples'] >= 30


@pytest.mark.parametrize('transport', ['tcp', 'pty'])
def test_a_connection_cut_in_the_middle_of_a_packet(harness_factory, ibeacon_bin, transport):
    """The controller's link ends after 4 of the 7 bytes of an event: scan ends with the I/O
    exit code and says where the link ended, without hanging."""
    h = harness_factory('--beacon', f'{UUID},258,772,-59,100', *(['--pty'] if transport == 'pty' else []))
    proc = subprocess.Popen([str(ibeacon_bin), 'scan', '--device', h.device_spec, '--json', '--duration', '30'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()  # scanning
    h.send('cut-mid-packet')
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 74, (proc.returncode, err)
    assert 'in the middle of a packet (4 bytes of it received)' in err, err


def test_an_answer_after_the_timeout_is_a_timeout(harness_factory, ibeacon_bin, tmp_path):
    h = harness_factory('--scanner', '--features', 'legacy', '--fail', '0x2008=late:1500')
    r = run(ibeacon_bin, 'advertise', '--device', h.device_spec, '--profile', str(profile(tmp_path)), '--timeout', '0.5')
    assert r.returncode == 75, (r.returncode, r.stderr)
    assert 'LE Set Advertising Data (0x2008) got no answer within 0.5 s' in r.stderr, r.stderr
    ended = time.monotonic()
    time.sleep(2.0)  # the late answer arrives meanwhile; advertising must still be off
    assert h.adv_events(since=ended + 0.3, address=h.address) == []


@pytest.mark.parametrize('features, opcode, name', [
    ('legacy', 0x200B, 'LE Set Scan Parameters'),
    ('legacy', 0x200C, 'LE Set Scan Enable'),
    ('extended', 0x2041, 'LE Set Extended Scan Parameters'),
    ('extended', 0x2042, 'LE Set Extended Scan Enable'),
])
def test_rejected_scan_commands(harness_factory, ibeacon_bin, tmp_path, features, opcode, name):
    h = harness_factory('--features', features, '--fail', f'0x{opcode:04X}=0x0C',
                        '--beacon', f'{UUID},258,772,-59,100')
    r = run(ibeacon_bin, 'scan', '--device', h.device_spec, '--duration', '2', '--json')
    assert r.returncode == 76, (r.returncode, r.stderr)
    assert f'{name} (0x{opcode:04X}) failed: Command Disallowed (0x0C)' in r.stderr, r.stderr
    p = profile(tmp_path)
    before = p.read_bytes()
    r = run(ibeacon_bin, 'calibrate', '--device', h.device_spec, '--profile', str(p), '--duration', '3')
    assert r.returncode == 76, (r.returncode, r.stderr)
    assert f'({hex(opcode)[2:].upper().rjust(4, "0").join(["0x", ""])})' in r.stderr or f'0x{opcode:04X}' in r.stderr
    assert p.read_bytes() == before


def test_an_unsupported_command_in_info_names_command_and_status(harness_factory, ibeacon_bin):
    h = harness_factory('--fail', '0x2003=0x01')
    r = run(ibeacon_bin, 'info', '--device', h.device_spec)
    assert r.returncode == 76, (r.returncode, r.stderr)
    assert 'LE Read Local Supported Features (0x2003) failed: Unknown HCI Command (0x01)' in r.stderr, r.stderr
