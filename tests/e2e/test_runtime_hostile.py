"""Issue 23 ("Safe as root, round 2"), the runtime half: hostile names on the terminal, a capture
whose time jumps by 9e12 s, and what `monitor --exec` hooks may and may not do (inherit
descriptors, outlive ibeacon, leave zombies when ibeacon is PID 1, hold up a second SIGTERM).
Captures are written here byte by byte; live events come from the Bumble harness."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import time
import uuid as uuidlib
from pathlib import Path

import pytest

from support import BEACON_UUID, MAJOR, MINOR, wait_until, write_profile

EPOCH_DELTA_US = 0x00DCDDB30F2F8000
T0 = EPOCH_DELTA_US + 1_700_000_000 * 1_000_000


def report_event(rssi: int = -61, minor: int = MINOR) -> bytes:
    """LE Advertising Report (ADV_NONCONN_IND, random address) carrying the test iBeacon."""
    data = (bytes([0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]) + uuidlib.UUID(BEACON_UUID).bytes
            + struct.pack('>HHb', MAJOR, minor, -59))
    body = bytes([0x02, 0x01, 0x03, 0x01]) + bytes([0x11, 0x22, 0x33, 0x44, 0x55, 0xC6]) + bytes([len(data)]) + data
    body += struct.pack('b', rssi)
    return bytes([0x04, 0x3E, len(body)]) + body


def capture(path: Path, times_us: list[int]) -> Path:
    """A btsnoop file (datalink 1002, H4) with one report at each time (µs after T0)."""
    out = b'btsnoop\0' + struct.pack('>II', 1, 1002)
    for t in times_us:
        packet = report_event()
        out += struct.pack('>IIIIq', len(packet), len(packet), 3, 0, T0 + t) + packet
    path.write_bytes(out)
    return path


def is_running(pid: int) -> bool:
    """Exists and is not a zombie."""
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return False
    return not stat[stat.rindex(')') + 1:].startswith(' Z')


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process whose parent is `pid`."""
    out = []
    for entry in Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / 'stat').read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(')') + 2:].split()
        if int(fields[1]) == pid:
            out.append((int(entry.name), fields[0]))
    return out


# --- item 3: names reach the terminal escaped -------------------------------------------------

HOSTILE = 'bakery\x1b]0;owned\x07\x1b[31m\u202e\x9b2J\nt+0.000 s exit    forged: fake'


def test_a_hostile_profile_name_is_escaped_on_stdout_and_in_the_log(ibeacon_bin: Path, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / 'p.json', name=HOSTILE)
    cap = capture(tmp_path / 'c.btsnoop', [0, 500_000, 1_000_000])
    proc = subprocess.run([str(ibeacon_bin), 'monitor', '--profile', str(profile), '--exit-after', '5',
                           '--device', f'btsnoop:{cap}'],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    for stream in (proc.stdout, proc.stderr):
        assert not any(c in stream for c in '\x1b\x07\x9b\u202e'), repr(stream)
    # One event line (the first determination is a state, issue 24) and the final state line,
    # each one line whatever the name holds.
    lines = proc.stdout.splitlines()
    assert [line.split()[2] for line in lines] == ['inside', 'final'], lines
    assert lines[0].startswith('t+0.000 s inside  bakery\\u{1B}]0;owned\\u{7}\\u{1B}[31m\\u{202E}\\u{9B}2J\\u{A}t+0.000 s'), lines
    # Log lines too: every stderr line is one entry (none starts with the forged text).
    assert 'monitoring 1 region(s)' in proc.stderr and 'bakery\\u{1B}]0;owned' in proc.stderr, proc.stderr
    assert not any(line.startswith('t+0.000 s exit') for line in proc.stderr.splitlines())
    # --json keeps the exact name (a parser reads it back), written as \u escapes.
    js = subprocess.run([str(ibeacon_bin), 'monitor', '--json', '--profile', str(profile), '--exit-after', '5',
                         '--device', f'btsnoop:{cap}'], capture_output=True, text=True, timeout=30)
    assert js.returncode == 0, js.stderr
    assert not any(c in js.stdout for c in '\x1b\x07\x9b\u202e')
    assert [json.loads(line)['region'] for line in js.stdout.splitlines()] == [HOSTILE, HOSTILE]  # inside, final


# --- item 5: a jump of 9e12 s in a 154-byte capture --------------------------------------------

@pytest.mark.parametrize('command', ['scan', 'monitor'])
def test_a_capture_whose_time_jumps_by_9e12_s_finishes(ibeacon_bin: Path, tmp_path: Path, command: str) -> None:
    cap = capture(tmp_path / 'gap.btsnoop', [0, 9_000_000_000_000_000_000])
    assert cap.stat().st_size == 16 + 2 * (24 + len(report_event()))
    args = ['--region', f'{BEACON_UUID}', '--exit-after', '30'] if command == 'monitor' else ['--json', '--reports']
    # Before the fix this ticked through every second of the gap at 100 % CPU (days).
    proc = subprocess.run([str(ibeacon_bin), command, '--device', f'btsnoop:{cap}', *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    if command == 'scan':
        assert [json.loads(line)['t'] for line in proc.stdout.splitlines()] == [0, 9e12]
    else:
        assert [line.split()[2] for line in proc.stdout.splitlines()] == ['inside', 'exit', 'unknown', 'inside', 'final'], proc.stdout


# --- hooks ------------------------------------------------------------------------------------

def test_a_hook_gets_no_inherited_descriptor_and_nothing_of_it_outlives_ibeacon(
    ibeacon_bin: Path, tmp_path: Path
) -> None:
    """The invoker leaves a descriptor open for ibeacon and sets NOTIFY_SOCKET; the hook starts
    a process in a session of its own (out of its process group) and exits. The hook sees
    neither; the detached process is ended when ibeacon exits."""
    cap = capture(tmp_path / 'c.btsnoop', [0, 500_000])
    hook = (f'ls /proc/self/fd > {tmp_path}/fds; env > {tmp_path}/env; '
            f'setsid sleep 60 & echo $! > {tmp_path}/detached')
    read_end, write_end = os.pipe()  # inheritable, as a parent's pipe would be
    try:
        env = dict(os.environ, NOTIFY_SOCKET=str(tmp_path / 'notify'))
        proc = subprocess.run([str(ibeacon_bin), 'monitor', '--region', BEACON_UUID, '--device', f'btsnoop:{cap}',
                               '--exec', hook, '--exec-shell'], capture_output=True, text=True, timeout=30,
                              pass_fds=(write_end,), env=env)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    fds = (tmp_path / 'fds').read_text().split()
    assert str(write_end) not in fds and len(fds) <= 4, fds  # 0 1 2 and ls's own
    assert 'NOTIFY_SOCKET' not in (tmp_path / 'env').read_text()
    detached = int((tmp_path / 'detached').read_text())
    assert wait_until(lambda: not is_running(detached), 5), f'{detached} outlived ibeacon'
    assert 'left running' in proc.stderr, proc.stderr


def test_a_second_sigterm_ends_the_monitor_while_a_hook_is_being_stopped(
    ibeacon_bin: Path, harness_factory, tmp_path: Path
) -> None:
    h = harness_factory()
    pidfile = tmp_path / 'hook.pid'
    hook = f"sh -c 'echo $$ > {pidfile}; trap \"\" TERM; sleep 60; sleep 60'"
    proc = subprocess.Popen([str(ibeacon_bin), 'monitor', '--device', h.device_spec, '--region', BEACON_UUID,
                             '--exit-after', '0.5', '--exec', hook],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 15)
        hook_pid = int(pidfile.read_text())
        proc.send_signal(signal.SIGTERM)
        # Now stopping the hook: 5 s of grace, then SIGTERM (ignored), SIGKILL. The second SIGTERM
        # comes 1.5 s later, a deliberate second request: a repeat within 1 s is the same request
        # (issue 29: `timeout` and process-group kills deliver it twice) and would be ignored.
        time.sleep(1.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        # Before: ignored, the monitor took about 7 s more.
        rc = proc.wait(timeout=3)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read() if proc.stderr else ''
    assert rc == 128 + signal.SIGTERM, err
    assert 'SIGTERM again' in err
    assert wait_until(lambda: not is_running(hook_pid), 3), 'the hook outlived ibeacon'


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which('unshare') is None, reason='needs root and unshare')
def test_as_pid_1_what_hooks_leave_behind_is_reaped(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    """ibeacon as PID 1 of a PID namespace (a container without an init): each of 8 hooks
    leaves a grandchild that ends 0.2 s later; it is reparented to ibeacon. No zombie stays."""
    h = harness_factory()
    regions = [arg for i in range(8) for arg in ('--region', f'r{i}={str(uuidlib.UUID(int=i + 1)).upper()}')]
    proc = subprocess.Popen(['unshare', '--pid', '--fork', '--mount-proc', str(ibeacon_bin), 'monitor',
                             '--device', h.device_spec, *regions, '--exit-after', '0.5',
                             '--exec', 'sh -c "sleep 0.2 &"'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: len(children(proc.pid)) == 1, 10)
        init = children(proc.pid)[0][0]  # ibeacon, PID 1 inside
        out: list[str] = []
        assert wait_until(lambda: out.append(proc.stdout.readline()) or len(out) >= 8, 20), out
        # Every hook ran and its grandchild ended well before now.
        time.sleep(2)
        zombies = [c for c in children(init) if c[1] == 'Z']
        assert zombies == [], zombies
        os.kill(init, signal.SIGTERM)
        rc = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read() if proc.stderr else ''
    assert rc == 0, err
    assert 'hooks: 8 run, 0 failed, 0 dropped' in err, err
