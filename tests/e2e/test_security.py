"""Issue 11, the file half: ibeacon run as root next to another user (`nobody`) who shares a
directory with it, through the real binary. Every directory is made under a fresh mkdtemp with
mode 1777 like /tmp; the other user's actions are real processes run with `runuser -u nobody`.
The host has fs.protected_symlinks=0 (Debian sets 1): these pass because of ibeacon's own
checks, not the kernel's.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import time
from pathlib import Path

import pytest

from support import BEACON_UUID, MAJOR, MINOR, run, write_profile

NOBODY = pwd.getpwnam('nobody')
# The other user's helper scripts use only the standard library; the test venv may not be
# readable by nobody.
SYSTEM_PYTHON = '/usr/bin/python3'
BEACON = f'{BEACON_UUID},{MAJOR},{MINOR},-59,100'
VICTIM_TEXT = 'thesis, chapter 1: never to be overwritten\n'
# A device spec nothing listens on: commands that must fail before connecting never get there.
NOWHERE = 'tcp:127.0.0.1:9'

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root to act as root and as nobody')



@pytest.fixture
def victim(shared: Path) -> Path:
    """A root-only file, like /home/victim/thesis.txt or /etc/shadow."""
    home = shared / 'victim-home'
    home.mkdir(mode=0o700)
    path = home / 'thesis.txt'
    path.write_text(VICTIM_TEXT)
    path.chmod(0o600)
    return path


def as_nobody(*args: str) -> list[str]:
    return ['runuser', '-u', 'nobody', '--', *args]


def nobody_runs(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(as_nobody(*args), capture_output=True, text=True, timeout=30)
    assert 0 <= result.returncode < 128, (result.returncode, result.stderr)
    assert 'Fatal error' not in result.stderr, result.stderr
    return result


def connected(harness) -> list:
    return [e for e in harness.events('client') if e.get('state') == 'connected']


# -- item 1: a planted symbolic link ---------------------------------------------------------


def test_planted_symlink_is_never_followed(ibeacon_bin: Path, shared: Path, victim: Path) -> None:
    link = shared / 'store12.json'
    nobody_runs('ln', '-s', str(victim), str(link))
    assert link.lstat().st_uid == NOBODY.pw_uid
    for extra in ([], ['--force']):
        r = run(ibeacon_bin, 'profile', 'new', str(link), '--major', '12', '--minor', '1', *extra)
        assert r.returncode == 73, (extra, r.returncode, r.stderr)
        assert 'symbolic link owned by uid 65534' in r.stderr, r.stderr
    t0 = time.monotonic()
    r = run(
        ibeacon_bin, 'calibrate', '--uuid', BEACON_UUID, '--major', '12', '--minor', '1',
        '--write', str(link), '--device', NOWHERE,
    )
    assert r.returncode == 73, r.stderr
    assert time.monotonic() - t0 < 5
    assert victim.read_text() == VICTIM_TEXT
    assert link.is_symlink()


# -- item 2: the profile swapped for a symbolic link while root writes it --------------------

ATTACKER = r'''
import os, sys, time
d, victim = sys.argv[1], sys.argv[2]
p, evil, stash = (os.path.join(d, n) for n in ('store12.json', 'evil', 'stash'))
swaps = 0
print('ready', flush=True)
while not os.path.exists(os.path.join(d, 'stop')):
    try:
        os.unlink(evil)
    except FileNotFoundError:
        pass
    os.symlink(victim, evil)
    try:
        os.rename(p, stash)      # the real profile aside...
    except FileNotFoundError:
        continue
    os.rename(evil, p)           # ...the profile is now a link to the victim...
    time.sleep(0.0002)
    os.rename(stash, p)          # ...and back
    swaps += 1
    time.sleep(0.0002)
print(swaps, flush=True)
'''


def test_racing_attacker_never_gets_the_victim_written(
    ibeacon_bin: Path, harness_factory, shared: Path, victim: Path
) -> None:
    # The attacker's own directory: root is asked to calibrate a profile that lives there.
    home = shared / 'attacker'
    home.mkdir()
    os.chown(home, NOBODY.pw_uid, NOBODY.pw_gid)
    profile = home / 'store12.json'
    write_profile(profile)
    os.chown(profile, NOBODY.pw_uid, NOBODY.pw_gid)
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')

    # calibrate reads and locks the profile, then measures; the attacker starts once it scans.
    calibrate = subprocess.Popen(
        [str(ibeacon_bin), 'calibrate', '--profile', str(profile), '--device', h.device_spec, '--json'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    h.wait_for(lambda e: e['event'] == 'client' and e.get('state') == 'connected', timeout=10)
    attacker = subprocess.Popen(
        as_nobody(SYSTEM_PYTHON, '-c', ATTACKER, str(home), str(victim)), stdout=subprocess.PIPE, text=True
    )
    try:
        assert attacker.stdout is not None
        assert attacker.stdout.readline().strip() == 'ready'
        _, cal_err = calibrate.communicate(timeout=60)
        # And the same race against the plain write path, many times.
        outcomes: dict[int, int] = {}
        for minor in range(60):
            r = run(ibeacon_bin, 'profile', 'new', str(profile), '--major', '12', '--minor', str(minor), '--force')
            outcomes[r.returncode] = outcomes.get(r.returncode, 0) + 1
            assert r.returncode in (0, 73, 74), r.stderr
    finally:
        (home / 'stop').touch()
        swaps = int(attacker.communicate(timeout=10)[0].strip() or 0)
    print(f'attacker swaps {swaps}, calibrate exit {calibrate.returncode}, profile new exits {outcomes}')
    # 0 when its write fell between swaps; 73 "nothing was written" when it met the link.
    assert calibrate.returncode in (0, 73), cal_err
    assert swaps > 100, swaps
    assert victim.read_text() == VICTIM_TEXT
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert outcomes.get(0, 0) > 0, outcomes  # the writer still got through between swaps


# -- item 3: --btsnoop ------------------------------------------------------------------------


def test_btsnoop_never_clobbers(ibeacon_bin: Path, harness_factory, shared: Path, victim: Path) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    existing = shared / 'old.btsnoop'
    existing.write_text('an earlier capture\n')
    r = run(ibeacon_bin, 'info', '--device', h.device_spec, '--btsnoop', str(existing))
    assert r.returncode == 73, r.stderr
    assert 'already exists' in r.stderr and '--overwrite-btsnoop' in r.stderr, r.stderr
    assert existing.read_text() == 'an earlier capture\n'

    # A link planted by another user is not followed, even when overwriting is asked for.
    link = shared / 'scan.btsnoop'
    nobody_runs('ln', '-s', str(victim), str(link))
    r = run(ibeacon_bin, 'info', '--device', h.device_spec, '--btsnoop', str(link), '--overwrite-btsnoop')
    assert r.returncode == 73, r.stderr
    assert victim.read_text() == VICTIM_TEXT

    # Never the profile being calibrated, whatever the name it is given by.
    profile = write_profile(shared / 'store12.json')
    before = profile.read_bytes()
    (shared / 'alias.json').symlink_to('store12.json')
    for name in ('store12.json', 'alias.json'):
        r = run(
            ibeacon_bin, 'calibrate', '--profile', str(profile), '--device', h.device_spec,
            '--btsnoop', str(shared / name), '--overwrite-btsnoop',
        )
        assert r.returncode == 73, r.stderr
        assert 'is the profile this command writes' in r.stderr, r.stderr
    assert profile.read_bytes() == before

    # Asked for: replaced by a new capture.
    r = run(ibeacon_bin, 'info', '--device', h.device_spec, '--btsnoop', str(existing), '--overwrite-btsnoop')
    assert r.returncode == 0, r.stderr
    assert existing.read_bytes()[:8] == b'btsnoop\0'


def test_btsnoop_permission_error_is_cannot_write_not_capabilities(
    ibeacon_bin: Path, harness_factory, shared: Path
) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    closed = shared / 'root-only'
    closed.mkdir(mode=0o755)  # nobody may not create files here
    r = nobody_runs(str(ibeacon_bin), 'info', '--device', h.device_spec, '--btsnoop', str(closed / 'x.btsnoop'))
    assert r.returncode == 73, r.stderr
    assert 'CAP_NET_RAW' not in r.stderr and 'permission denied' in r.stderr.lower(), r.stderr


# -- items 5 and 12: owner and mode kept; a reader cannot block root's calibration ------------


def test_root_calibrates_nobodys_profile_while_nobody_holds_a_flock_on_it(
    ibeacon_bin: Path, harness_factory, shared: Path
) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    profile = write_profile(shared / 'store12.json')
    os.chown(profile, NOBODY.pw_uid, NOBODY.pw_gid)
    profile.chmod(0o2640)  # set-group-ID: must not survive the rewrite
    holder = subprocess.Popen(
        as_nobody(
            SYSTEM_PYTHON, '-c',
            'import fcntl, sys, time; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); '
            'print("locked", flush=True); time.sleep(60)',
            str(profile),
        ),
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == 'locked'
        r = run(ibeacon_bin, 'calibrate', '--profile', str(profile), '--device', h.device_spec, '--json', timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 0, r.stderr
    st = profile.stat()
    assert (st.st_uid, st.st_gid) == (NOBODY.pw_uid, NOBODY.pw_gid)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert json.loads(profile.read_text())['measuredPower'] == -59
    assert sorted(p.name for p in shared.iterdir()) == ['store12.json']  # no lock or temporary file left


def test_unwritable_directory_is_refused_before_measuring(
    ibeacon_bin: Path, harness_factory, shared: Path
) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    closed = shared / 'root-dir'
    closed.mkdir(mode=0o755)
    profile = write_profile(closed / 'store12.json')
    os.chown(profile, NOBODY.pw_uid, NOBODY.pw_gid)  # nobody may write the file, not the directory
    t0 = time.monotonic()
    r = nobody_runs(str(ibeacon_bin), 'calibrate', '--profile', str(profile), '--device', h.device_spec)
    assert r.returncode == 73, r.stderr
    assert 'directory' in r.stderr, r.stderr
    assert time.monotonic() - t0 < 5
    assert not connected(h), 'it measured before finding out it cannot write'


# -- item 7 and --force: FIFOs, devices, directories ------------------------------------------


def test_fifo_device_and_directory_are_refused_without_blocking(ibeacon_bin: Path, shared: Path) -> None:
    fifo = shared / 'fifo.json'
    os.mkfifo(fifo)
    device = shared / 'null.json'
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    directory = shared / 'dir.json'
    directory.mkdir()
    for path in (fifo, device, directory):
        for args, code in (
            (['profile', 'check', str(path)], 66),
            (['calibrate', '--profile', str(path), '--device', NOWHERE], 66),
            (['profile', 'new', str(path), '--major', '1', '--minor', '2', '--force'], 73),
        ):
            r = run(ibeacon_bin, *args, timeout=10)
            assert r.returncode == code, (args, r.returncode, r.stderr)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert stat.S_ISCHR(device.lstat().st_mode)
    assert directory.is_dir()


# -- items 11 and 12: big profiles, names, dash file names ------------------------------------


def test_profile_with_132k_keys_checks_in_under_a_second(ibeacon_bin: Path, shared: Path) -> None:
    # The shortest distinct keys (printable ASCII but " and \\), as many as fit in 1 MiB.
    alphabet = [chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"\\']
    keys = alphabet + [a + b for a in alphabet for b in alphabet]
    keys += [a + b + c for a in alphabet for b in alphabet for c in alphabet][: 132_000 - len(keys)]
    head = f'{{"uuid":"{BEACON_UUID}","major":1,"minor":2,"measuredPower":-59'
    text = head + ''.join(f',"{k}":0' for k in keys) + '}'
    assert len(text) <= 1 << 20
    path = shared / 'big.json'
    path.write_text(text)
    # The same size in one string: what reading and parsing 1 MiB costs this build (a debug
    # build on a loaded machine is several times slower than release).
    baseline_path = shared / 'flat.json'
    baseline_path.write_text(head + ',"note":"' + 'x' * (len(text) - len(head) - 11) + '"}')

    def seconds(p: Path) -> float:
        t0 = time.monotonic()
        r = run(ibeacon_bin, 'profile', 'check', str(p), timeout=60)
        assert r.returncode == 0, r.stderr
        return time.monotonic() - t0

    baseline = min(seconds(baseline_path) for _ in range(2))
    elapsed = seconds(path)
    print(f'132,000 keys: {elapsed:.2f} s; one 1 MiB string: {baseline:.2f} s')
    assert elapsed < max(1.0, 6 * baseline), (elapsed, baseline)


def test_profile_over_one_mebibyte_is_bad_data(ibeacon_bin: Path, shared: Path) -> None:
    path = shared / 'huge.json'
    path.write_text(' ' * ((1 << 20) + 1))
    r = run(ibeacon_bin, 'profile', 'check', str(path))
    assert r.returncode == 65, r.stderr
    assert 'larger than 1 MiB' in r.stderr


def test_dash_file_name_and_escaped_name(ibeacon_bin: Path, shared: Path) -> None:
    write_profile(shared / '-dash.json', name='Store 12\u001b]0;owned\u0007\u001b[2J')
    r = subprocess.run(
        [str(ibeacon_bin), 'profile', 'check', '-dash.json'], cwd=shared, capture_output=True, text=True, timeout=10
    )
    assert r.returncode == 0, r.stderr
    assert 'OVERVIEW' not in r.stdout
    assert '-dash.json: ok' in r.stdout
    assert '\x1b' not in r.stdout and '\x07' not in r.stdout
    assert 'Store 12\\u{1B}]0;owned\\u{7}\\u{1B}[2J' in r.stdout
    r = subprocess.run(
        [str(ibeacon_bin), 'profile', 'check', '-nosuch.json'], cwd=shared, capture_output=True, text=True,
        timeout=10,
    )
    assert r.returncode == 64
    assert "unknown option '-nosuch.json'" in r.stderr and 'OVERVIEW' not in r.stdout


def test_a_directory_that_cannot_be_searched_is_not_taken_for_a_missing_file(
    ibeacon_bin: Path, shared: Path
) -> None:
    closed = shared / 'root-700'
    closed.mkdir(mode=0o700)
    r = nobody_runs(str(ibeacon_bin), 'profile', 'new', str(closed / 'x.json'), '--major', '1', '--minor', '2')
    assert r.returncode == 73, r.stderr
    assert 'cannot be looked up: permission denied' in r.stderr, r.stderr
    r = nobody_runs(
        str(ibeacon_bin), 'calibrate', '--uuid', BEACON_UUID, '--major', '1', '--minor', '2',
        '--write', str(closed / 'x.json'), '--device', NOWHERE,
    )
    assert r.returncode == 73, r.stderr  # before measuring, not "does not exist, will create"
