"""How `ibeacon calibrate` treats the profile file, end to end: the exclusive lock between two
calibrations, edits made while measuring, permission bits, symlinks to a shared profile, and
the refusals that must come before any scanning (missing, malformed, directory).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
MAJOR = 0x0102  # 258
MINOR = 0x0304  # 772
BEACON = f'{UUID},{MAJOR},{MINOR},-59,100'
PROFILE_TEXT = """{
  "name": "Store 12 entrance",
  "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
  "major": 258,
  "minor": 772,
  "measuredPower": -65,
  "installer": {"who": "x"}
}
"""


def command(ibeacon_bin: Path, profile: Path, device: str, *extra: str) -> list[str]:
    return [str(ibeacon_bin), 'calibrate', '--profile', str(profile), '--device', device, '--json', *extra]


def run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


def connected(harness) -> list[dict[str, Any]]:
    return [e for e in harness.events('client') if e.get('state') == 'connected']


def test_second_calibration_of_one_profile_is_refused_while_the_first_runs(
    ibeacon_bin: Path, harness_factory, tmp_path: Path
) -> None:
    first_world = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    second_world = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    profile = tmp_path / 'store12.json'
    profile.write_text(PROFILE_TEXT)

    first = subprocess.Popen(
        command(ibeacon_bin, profile, first_world.device_spec), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        first_world.wait_for(lambda e: e['event'] == 'client' and e.get('state') == 'connected', timeout=10)
        t0 = time.monotonic()
        second = run(command(ibeacon_bin, profile, second_world.device_spec))
        elapsed = time.monotonic() - t0
        assert first.poll() is None, 'the first calibration ended before the second was tried'
    finally:
        out, err = first.communicate(timeout=60)

    assert second.returncode == 75, second.stderr
    assert 'is being written by another ibeacon process' in second.stderr
    assert elapsed < 2.0
    assert not connected(second_world), 'the refused calibration scanned anyway'
    assert first.returncode == 0, err
    result = json.loads(out)
    assert json.loads(profile.read_text())['measuredPower'] == result['measuredPower'] == -59

    # Released when the first one ended: a third one runs.
    third = run(command(ibeacon_bin, profile, second_world.device_spec))
    assert third.returncode == 0, third.stderr


def test_edits_made_while_measuring_are_kept(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    profile = tmp_path / 'store12.json'
    profile.write_text(PROFILE_TEXT)

    proc = subprocess.Popen(
        command(ibeacon_bin, profile, h.device_spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        h.wait_for(lambda e: e['event'] == 'client' and e.get('state') == 'connected', timeout=10)
        # Someone edits the profile (atomically, as editors do) while the receiver measures.
        edited = json.loads(PROFILE_TEXT)
        edited['name'] = 'Store 12 entrance (moved)'
        edited['note'] = 'edited while measuring'
        scratch = tmp_path / 'edit.tmp'
        scratch.write_text(json.dumps(edited, indent=2) + '\n')
        os.rename(scratch, profile)
        assert proc.poll() is None, 'the calibration ended before the edit'
    finally:
        out, err = proc.communicate(timeout=60)

    assert proc.returncode == 0, err
    doc = json.loads(profile.read_text())
    assert doc['name'] == 'Store 12 entrance (moved)'
    assert doc['note'] == 'edited while measuring'
    assert doc['installer'] == {'who': 'x'}
    assert doc['measuredPower'] == json.loads(out)['measuredPower'] == -59
    assert 'calibration' in doc


def test_permission_bits_are_kept(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    profile = tmp_path / 'store12.json'
    profile.write_text(PROFILE_TEXT)
    profile.chmod(0o640)
    inode = profile.stat().st_ino

    proc = run(command(ibeacon_bin, profile, h.device_spec))

    assert proc.returncode == 0, proc.stderr
    assert profile.stat().st_ino != inode  # replaced by rename…
    assert stat.S_IMODE(profile.stat().st_mode) == 0o640  # …with the same permission bits
    assert sorted(os.listdir(tmp_path)) == ['store12.json']


def test_symlinked_profile_updates_the_shared_file(
    ibeacon_bin: Path, harness_factory, tmp_path: Path
) -> None:
    # A spot's profile may be a symlink to a shared file (IBeaconHost/Files/SafePathWalk.swift says so).
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    shared = tmp_path / 'shared' / 'store12.json'
    shared.parent.mkdir()
    shared.write_text(PROFILE_TEXT)
    link = tmp_path / 'spot.json'
    link.symlink_to(Path('shared') / 'store12.json')

    proc = run(command(ibeacon_bin, link, h.device_spec))

    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink(), 'the symlink was replaced by a copy; the shared profile is stale'
    assert json.loads(shared.read_text())['measuredPower'] == -59
    assert sorted(os.listdir(tmp_path)) == ['shared', 'spot.json']
    assert sorted(os.listdir(shared.parent)) == ['store12.json']


def refused_before_connecting(
    ibeacon_bin: Path, harness, profile: Path
) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    proc = run(command(ibeacon_bin, profile, harness.device_spec))
    assert time.monotonic() - t0 < 2.0
    assert not connected(harness), 'it scanned before refusing'
    assert proc.stderr.startswith('ibeacon: '), proc.stderr
    return proc


def test_missing_profile(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    h = harness_factory('--beacon', BEACON)
    proc = refused_before_connecting(ibeacon_bin, h, tmp_path / 'missing.json')
    assert proc.returncode == 66, proc.stderr
    assert 'no such file' in proc.stderr
    assert os.listdir(tmp_path) == []


def test_directory_instead_of_profile(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    h = harness_factory('--beacon', BEACON)
    (tmp_path / 'store12.json').mkdir()
    proc = refused_before_connecting(ibeacon_bin, h, tmp_path / 'store12.json')
    assert proc.returncode == 66, proc.stderr
    assert 'directory' in proc.stderr


def test_malformed_profile_is_refused_and_untouched(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    h = harness_factory('--beacon', BEACON)
    profile = tmp_path / 'store12.json'
    text = PROFILE_TEXT.replace('"major": 258', '"major": 70000')
    profile.write_text(text)
    proc = refused_before_connecting(ibeacon_bin, h, profile)
    assert proc.returncode == 65, proc.stderr
    assert 'major' in proc.stderr
    assert profile.read_text() == text
    assert sorted(os.listdir(tmp_path)) == ['store12.json']
