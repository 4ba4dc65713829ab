"""End-to-end: `ibeacon status` against the Bumble DUT over H4 (tcp:). An advertise process
runs → status lists its beacon on the air with its profile and since when, exit 0; the process
is killed with SIGKILL → its record is a leftover, the beacon is off the air, exit 82; `ibeacon
stop` on that device → clean again, exit 0. Each test has a runtime directory of its own
(IBEACON_RUNTIME_DIR), so the host's /run/ibeacon is neither read nor written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

from support import start_advertising, stop_process, wait_until, write_profile

EX_STATUS_OFF = 82


def status(ibeacon_bin: Path, runtime: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(ibeacon_bin), 'status', *args], capture_output=True, text=True, timeout=30,
        env={**os.environ, 'IBEACON_RUNTIME_DIR': str(runtime)},
    )
    assert 'Fatal error' not in result.stderr, result.stderr
    return result


def runtime_dir() -> Path:
    d = Path(tempfile.mkdtemp(prefix='ibeacon-status-'))
    d.chmod(0o755)
    return d


def test_status_follows_an_advertiser_through_kill_and_stop(ibeacon_bin: Path, harness, tmp_path: Path, monkeypatch) -> None:
    runtime = runtime_dir()
    monkeypatch.setenv('IBEACON_RUNTIME_DIR', str(runtime))
    profile = write_profile(tmp_path / 'store12.json')

    quiet = status(ibeacon_bin, runtime, '--json')
    assert quiet.returncode == 0, quiet
    assert json.loads(quiet.stdout)['beacons'] == []

    proc = start_advertising(ibeacon_bin, harness, profile)
    try:
        # The record says "advertising" once the status line is out; allow for the write.
        def on_air() -> dict | None:
            doc = json.loads(status(ibeacon_bin, runtime, '--json').stdout)
            return doc if doc['beacons'] and doc['beacons'][0]['onAir'] else None

        assert wait_until(on_air, timeout=5), status(ibeacon_bin, runtime).stdout
        r = status(ibeacon_bin, runtime, '--json')
        assert r.returncode == 0, r
        doc = json.loads(r.stdout)
        assert doc['ok'] is True and doc['problems'] == []
        [beacon] = doc['beacons']
        assert beacon['profile'] == str(profile)
        assert beacon['device'] == harness.device_spec
        assert beacon['pid'] == proc.pid and beacon['running'] is True
        assert beacon['since'].endswith('Z') and isinstance(beacon['sinceUnix'], int)
        text = status(ibeacon_bin, runtime)
        assert text.returncode == 0
        assert f'beacon {profile} on {harness.device_spec}: ON AIR since' in text.stdout, text.stdout
        assert text.stdout.rstrip().endswith('all well')

        proc.kill()  # SIGKILL: no clean-up, the record stays
        proc.wait(timeout=5)
        r = status(ibeacon_bin, runtime, '--json')
        assert r.returncode == EX_STATUS_OFF, r
        doc = json.loads(r.stdout)
        assert doc['ok'] is False
        [beacon] = doc['beacons']
        assert beacon['onAir'] is False and beacon['running'] is False
        assert [x['pid'] for x in doc['leftovers']['records']] == [proc.pid]
        assert any('ibeacon stop --device ' + harness.device_spec in p for p in doc['problems']), doc['problems']
        text = status(ibeacon_bin, runtime)
        assert text.returncode == EX_STATUS_OFF and 'something is off' in text.stdout
    finally:
        if proc.poll() is None:
            stop_process(proc, signal.SIGKILL)

    s = subprocess.run(
        [str(ibeacon_bin), 'stop', '--device', harness.device_spec], capture_output=True, text=True, timeout=30,
    )
    assert s.returncode == 0, s
    assert f'session-{proc.pid}.advertise' in s.stdout, s.stdout
    r = status(ibeacon_bin, runtime, '--json')
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc['beacons'] == [] and doc['leftovers']['records'] == [] and doc['ok'] is True
    assert list(runtime.iterdir()) == []


def test_a_cleanly_stopped_advertiser_leaves_nothing_for_status(ibeacon_bin: Path, harness, tmp_path: Path, monkeypatch) -> None:
    runtime = runtime_dir()
    monkeypatch.setenv('IBEACON_RUNTIME_DIR', str(runtime))
    proc = start_advertising(ibeacon_bin, harness, write_profile(tmp_path / 'p.json'), scanner=False)
    rc, _, _, err = stop_process(proc, signal.SIGTERM)
    assert rc == 0, err
    r = status(ibeacon_bin, runtime, '--json')
    assert r.returncode == 0 and json.loads(r.stdout)['beacons'] == [], r
    assert list(runtime.iterdir()) == []
