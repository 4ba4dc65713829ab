"""Signals and command-line numbers (issue 11, the runtime half; the hostile controller is in
test_hostile.py, split off to keep each file under a minute).

Every default-terminating signal turns advertising off before `advertise` exits (128 + signo);
SIGPIPE is ignored; an interrupted `calibrate` writes nothing (130/143); non-finite or absurd
durations and intervals are usage errors (64) naming the option and its range."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from support import advertising_disabled, run, start_advertising, stop_process, write_profile


# -- signals during advertise ------------------------------------------------------------------

@pytest.mark.parametrize(
    'sig', [signal.SIGHUP, signal.SIGUSR1, signal.SIGALRM, signal.SIGXCPU]
)
def test_terminating_signal_turns_advertising_off(harness_factory, ibeacon_bin: Path, tmp_path: Path, sig: int):
    """An SSH hang-up (SIGHUP) or any other default-terminating signal: the harness sees the
    disable command, the independent scanner stops hearing the beacon, exit 128 + signo."""
    h = harness_factory('--scanner', '--trace')
    profile = write_profile(tmp_path / 'p.json')
    proc = start_advertising(ibeacon_bin, h, profile)
    rc, elapsed, _, err = stop_process(proc, sig)
    assert rc == 128 + sig, (rc, err)
    assert elapsed < 2.0
    assert f'stopped by {signal.Signals(sig).name}' in err
    assert advertising_disabled(h)
    t_exit = time.monotonic()
    time.sleep(0.6)
    assert not h.adv_events(since=t_exit + 0.2), 'the scanner still hears the beacon'


def test_sigpipe_is_ignored_and_a_closed_stdout_does_not_kill(harness_factory, ibeacon_bin: Path, tmp_path: Path):
    """SIGPIPE (kill -PIPE, or stdout's reader gone) does not end advertise: it keeps advertising,
    and SIGTERM later still turns it off."""
    h = harness_factory('--scanner', '--trace')
    profile = write_profile(tmp_path / 'p.json')
    proc = start_advertising(ibeacon_bin, h, profile)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader of stdout goes away
    proc.send_signal(signal.SIGPIPE)
    time.sleep(1.0)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ''
    t = time.monotonic()
    assert h.wait_for(lambda e: e['event'] == 'adv' and e['t'] >= t, timeout=3)
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=3)
    assert rc == 0
    assert advertising_disabled(h)


# -- numbers from the command line ------------------------------------------------------------

@pytest.mark.parametrize(
    'args,option',
    [
        (['advertise', '--duration', 'inf'], '--duration'),
        (['advertise', '--duration', '1e16'], '--duration'),
        (['advertise', '--duration', 'nan'], '--duration'),
        (['advertise', '--check-interval', 'inf'], '--check-interval'),
        (['advertise', '--check-interval', '1e-9'], '--check-interval'),
        (['advertise', '--check-interval=-1'], '--check-interval'),
        (['advertise', '--timeout', 'inf'], '--timeout'),
        (['scan', '--duration', 'inf'], '--duration'),
        (['scan', '--duration', '1e300'], '--duration'),
        (['scan', '--timeout', 'nan'], '--timeout'),
        (['calibrate', '--duration', 'inf'], '--duration'),
        (['calibrate', '--precision', 'nan'], '--precision'),
        (['calibrate', '--offset', 'inf'], '--offset'),
        (['stop', '--timeout', '1e16'], '--timeout'),
        (['info', '--timeout=-inf'], '--timeout'),
        (['encode', '--uuid', 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0', '--major', '1', '--minor', '99999999999'],
         '--minor'),
        (['encode', '--uuid', 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0', '--major', '1', '--minor', '1',
          '--interval-ms', '9223372036854775807'], '--interval-ms'),
        (['profile', 'new', 'x.json', '--major', '1', '--minor', '1', '--measured-power', '-99999999999999999999'],
         '--measured-power'),
    ],
)
def test_absurd_numbers_are_usage_errors(ibeacon_bin: Path, tmp_path: Path, args: list[str], option: str):
    """Non-finite or absurd durations and intervals: exit 64 naming the option and its range,
    before any controller is touched (the device below does not exist)."""
    profile = write_profile(tmp_path / 'p.json')
    extra = ['--profile', str(profile)] if args[0] in ('advertise', 'calibrate') else []
    device = ['--device', 'tcp:127.0.0.1:1'] if args[0] in ('advertise', 'scan', 'calibrate', 'stop', 'info') else []
    result = run(ibeacon_bin, *args, *extra, *device, timeout=10)
    assert result.returncode == 64, (result.returncode, result.stderr)
    assert option in result.stderr, result.stderr
    if args[0] in ('advertise', 'scan', 'stop', 'info') or args[:2] == ['calibrate', '--duration']:
        assert 'seconds within' in result.stderr, result.stderr  # the allowed range is given


# -- interrupting calibrate ---------------------------------------------------------------------

@pytest.mark.parametrize('sig,code', [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_calibrate_writes_nothing(harness_factory, ibeacon_bin: Path, tmp_path: Path, sig: int, code: int):
    """Ctrl-C (or SIGTERM) while measuring: exit 130 (143), the profile byte for byte unchanged,
    and no partial result printed as if it were one."""
    h = harness_factory('--beacon', 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0,258,772,-59,20', '--rssi', 'gauss:-65,6')
    profile = write_profile(tmp_path / 'p.json', name='keep me')
    before = profile.read_bytes()
    proc = subprocess.Popen(
        [str(ibeacon_bin), 'calibrate', '--profile', str(profile), '--device', h.device_spec,
         '--precision', '0.01', '--duration', '60'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    time.sleep(2.5)  # samples are being collected
    assert proc.poll() is None
    rc, elapsed, out, err = stop_process(proc, sig)
    assert rc == code, (rc, out, err)
    assert elapsed < 2.0
    assert profile.read_bytes() == before
    assert 'wrote measuredPower' not in out
    assert 'nothing was written' in err
    assert not list(tmp_path.glob('.*tmp*')), list(tmp_path.iterdir())
