"""End-to-end: `ibeacon info`, `ibeacon devices`, device specs and their exit codes,
and `--btsnoop` captures read back by an independent decoder (tshark).

The controller is the Bumble DUT of tests/harness/bumble_harness.py (address
F0:F1:F2:F3:F4:F5), reached over H4/TCP or H4 over a pseudo-terminal.
Exit codes are sysexits(3), as `ibeacon --help` lists them.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

from support import run

DUT_ADDRESS = 'F0:F1:F2:F3:F4:F5'  # the harness default (--address)

EX_USAGE = 64
EX_NOINPUT = 66
EX_UNAVAILABLE = 69
EX_TEMPFAIL = 75


def info_json(ibeacon_bin: Path, device: str) -> dict:
    result = run(ibeacon_bin, 'info', '--device', device, '--json')
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.stdout
    return json.loads(lines[0])


def closed_tcp_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_info_tcp_extended_controller(harness_factory, ibeacon_bin):
    h = harness_factory()
    info = info_json(ibeacon_bin, h.device_spec)
    assert info['address'].upper() == DUT_ADDRESS
    assert info['extendedAdvertising'] is True
    assert info['device'] == h.device_spec
    # One schema's head for both paths (issue 31): device, path, address, as the kernel's info.
    assert list(info)[:3] == ['device', 'path', 'address'] and info['path'] == 'raw'
    # LE feature bit 12 (LE Extended Advertising, Vol 6 Part B 4.6) in the raw mask too.
    assert int(info['leFeatures'], 16) & (1 << 12)


def test_info_tcp_legacy_controller(harness_factory, ibeacon_bin):
    h = harness_factory('--features', 'legacy')
    info = info_json(ibeacon_bin, h.device_spec)
    assert info['address'].upper() == DUT_ADDRESS
    assert info['extendedAdvertising'] is False
    assert not int(info['leFeatures'], 16) & (1 << 12)


def test_info_over_pty(harness_factory, ibeacon_bin):
    h = harness_factory('--pty')
    assert h.device_spec.startswith('serial:/dev/pts/')
    info = info_json(ibeacon_bin, h.device_spec)
    assert info['address'].upper() == DUT_ADDRESS
    assert info['extendedAdvertising'] is True


def test_info_text_output_names_the_address(harness_factory, ibeacon_bin):
    h = harness_factory('--features', 'legacy')
    result = run(ibeacon_bin, 'info', '--device', h.device_spec)
    assert result.returncode == 0, result.stderr
    assert DUT_ADDRESS in result.stdout.upper()
    assert 'extended advertising: no' in result.stdout


def test_closed_tcp_port_is_unavailable(ibeacon_bin):
    port = closed_tcp_port()
    started = time.monotonic()
    result = run(ibeacon_bin, 'info', '--device', f'tcp:127.0.0.1:{port}')
    assert time.monotonic() - started < 10
    assert result.returncode == EX_UNAVAILABLE, result.stderr
    assert 'nothing is listening' in result.stderr


def test_missing_serial_device_is_no_input(ibeacon_bin):
    result = run(ibeacon_bin, 'info', '--device', 'serial:/dev/does-not-exist')
    assert result.returncode == EX_NOINPUT, result.stderr
    assert '/dev/does-not-exist' in result.stderr


def test_bogus_device_spec_is_usage_error(ibeacon_bin):
    result = run(ibeacon_bin, 'info', '--device', 'bogus:x')
    assert result.returncode == EX_USAGE, result.stderr
    assert 'bogus:x' in result.stderr


def test_unanswered_read_bd_addr_times_out(harness_factory, ibeacon_bin):
    h = harness_factory('--fail', '0x1009=none')
    started = time.monotonic()
    result = run(ibeacon_bin, 'info', '--device', h.device_spec, '--timeout', '0.5', timeout=20)
    elapsed = time.monotonic() - started
    assert result.returncode == EX_TEMPFAIL, result.stderr
    assert elapsed < 5, f'took {elapsed:.1f} s with --timeout 0.5'
    assert 'Read BD_ADDR (0x1009)' in result.stderr


def test_btsnoop_capture_opens_in_tshark(harness_factory, ibeacon_bin, tmp_path):
    assert shutil.which('tshark'), 'tshark is needed (apt-get install tshark)'
    h = harness_factory()
    capture = tmp_path / 'info.btsnoop'
    result = run(ibeacon_bin, 'info', '--device', h.device_spec, '--btsnoop', str(capture))
    assert result.returncode == 0, result.stderr
    assert capture.stat().st_size > 16  # more than the btsnoop file header
    decoded = subprocess.run(
        ['tshark', '-r', str(capture), '-T', 'fields', '-e', 'bthci_cmd.opcode'],
        capture_output=True, text=True, timeout=60,
    )
    assert decoded.returncode == 0, decoded.stderr
    opcodes = {int(v, 16) for v in decoded.stdout.split() if v.strip()}
    assert 0x1009 in opcodes, decoded.stdout  # Read BD_ADDR
    assert 0x2003 in opcodes, decoded.stdout  # LE Read Local Supported Features
    # Events are recorded as well: Command Complete (0x0E) for those commands.
    events = subprocess.run(
        ['tshark', '-r', str(capture), '-T', 'fields', '-e', 'bthci_evt.code'],
        capture_output=True, text=True, timeout=60,
    )
    assert events.returncode == 0, events.stderr
    assert 0x0E in {int(v, 16) for v in events.stdout.split() if v.strip()}, events.stdout


def test_devices_without_kernel_bluetooth(ibeacon_bin):
    result = run(ibeacon_bin, 'devices')
    assert result.returncode == EX_UNAVAILABLE, (result.stdout, result.stderr)
    assert 'no bluetooth support' in result.stderr.lower()


def test_info_hci0_without_kernel_bluetooth(ibeacon_bin):
    result = run(ibeacon_bin, 'info', '--device', 'hci0')
    assert result.returncode == EX_UNAVAILABLE, (result.stdout, result.stderr)
    assert 'no bluetooth support' in result.stderr.lower()
