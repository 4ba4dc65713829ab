"""`ibeacon calibrate` end to end against a Bumble-emulated iBeacon whose RSSI the test
controls (the harness injects it at the receiving controller), with fixed seeds: the written
measured power must be within 1 dB of the true value, and the refusals must leave the profile
byte for byte as it was.
"""
import concurrent.futures
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
TRUE_POWER = -59


def write_profile(path: Path, measured_power: int = -70, **extra) -> Path:
    doc = {'name': 'Store 12 entrance', 'uuid': UUID, 'major': 258, 'minor': 772, 'measuredPower': measured_power,
           'intervalMs': 100, 'installer': {'who': 'x'}}
    doc.update(extra)
    path.write_text(json.dumps(doc, indent=2) + '\n')
    return path


def calibrate(ibeacon_bin, h, *args, timeout=60):
    r = subprocess.run([str(ibeacon_bin), 'calibrate', '--device', h.device_spec, *args],
                       capture_output=True, text=True, timeout=timeout)
    assert 0 <= r.returncode < 128, r.stderr
    assert 'internal error' not in r.stderr and 'Fatal error' not in r.stderr, r.stderr
    return r


# (name, harness RSSI model, Apple's value: the mean a receiver sees, fades included)
SCENARIOS = [
    ('constant', 'constant:-59', -59.0),
    ('gauss-4dB', 'gauss:-59,4', -59.0),
    ('gauss-4dB-15pc-fades-15dB', 'fades:-59,4,0.15,15', -59 - 0.15 * 15),
    ('channel-offsets', 'channels:-59,4,-2,0,2', -59.0),
]


def test_written_measured_power_is_within_1_dB(harness_factory, ibeacon_bin, tmp_path):
    """Every scenario with seeds 1 and 2, all at once (each run mostly waits for advertisements:
    Apple's procedure takes at least 10 s)."""
    def radio(case):
        (name, model, truth), seed = case
        return harness_factory('--rssi', model, '--seed', str(seed), '--beacon', f'{UUID},258,772,-59,100',
                               ready_timeout=60)

    def one(case):
        (name, model, truth), seed = case
        h = radios[case]
        p = write_profile(tmp_path / f'{name}-{seed}.json')
        # The default --duration (180 s): runs end when ±1 dB is reached, the fades scenario (6.7 dB
        # spread) not before 60 s (docs/CALIBRATION.md). A shorter ceiling failed CI once: seed 2's
        # first 30 s look like slow variation (5 s block means spread 2.2× the prediction), and the
        # σ 4 dB runs of that seed take 56-90 s here.
        r = calibrate(ibeacon_bin, h, '--profile', str(p), '--json', timeout=240)
        return name, truth, h, p, r

    cases = [(s, seed) for s in SCENARIOS for seed in (1, 2)]
    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
        # Every radio is up before the first calibration starts (their start-up would otherwise
        # take CPU from the beacons already being measured).
        radios = dict(zip(cases, pool.map(radio, cases)))
        outcomes = list(pool.map(one, cases))
    for name, truth, h, p, r in outcomes:
        assert r.returncode == 0, (name, r.stderr)
        result = json.loads(r.stdout)
        # Written because ±1 dB was reached (no --force here), however long that took.
        assert result['precisionReached'] and result['written'] and not result['forced'], (name, result)
        assert abs(result['estimate'] - truth) <= 1.0, (name, result)
        assert abs(result['measuredPower'] - truth) <= 1.5, (name, result)
        # The histogram of every sample, strongest first, one bin per dBm, empty bins included.
        bins = result['histogram']
        assert sum(b['count'] for b in bins) == result['samples']
        assert [b['dBm'] for b in bins] == list(range(bins[0]['dBm'], bins[-1]['dBm'] - 1, -1))
        assert bins[0]['count'] > 0 and bins[-1]['count'] > 0
        # Apple's procedure: at least 10 s.
        assert result['seconds'] >= 10, (name, result)
        if name.startswith('gauss-4dB-15pc'):
            # Widely spread reports: never before 60 s.
            assert result['seconds'] >= 60, (name, result['seconds'])
        written = json.loads(p.read_text())
        assert written['measuredPower'] == result['measuredPower']
        assert written['installer'] == {'who': 'x'} and written['name'] == 'Store 12 entrance'
        assert list(written)[:7] == ['name', 'uuid', 'major', 'minor', 'measuredPower', 'intervalMs', 'installer']
        c = written['calibration']
        for key in ['timestamp', 'samples', 'estimate', 'interval95', 'spread', 'method', 'receiver',
                    'receiverAddress', 'offset', 'txPower']:
            assert key in c, key
        assert c['receiverAddress'] == h.address and c['receiver'] == h.device_spec
        assert c['method'] == 'apple-1hz-mean'


def test_offset_and_dry_run(harness_factory, ibeacon_bin, tmp_path):
    h = harness_factory('--rssi', 'constant:-59', '--beacon', f'{UUID},258,772,-59,100')
    p = write_profile(tmp_path / 'p.json')
    before = p.read_bytes()
    r = calibrate(ibeacon_bin, h, '--profile', str(p), '--dry-run', '--json')
    assert r.returncode == 0 and p.read_bytes() == before
    assert json.loads(r.stdout)['written'] is False
    r = calibrate(ibeacon_bin, h, '--profile', str(p), '--offset', '3', '--json')
    assert r.returncode == 0, r.stderr
    assert json.loads(p.read_text())['measuredPower'] == TRUE_POWER + 3


def test_new_profile_from_identity(harness_factory, ibeacon_bin, tmp_path):
    h = harness_factory('--rssi', 'constant:-61', '--beacon', f'{UUID},258,772,-59,100')
    new = tmp_path / 'new.json'
    r = calibrate(ibeacon_bin, h, '--uuid', UUID, '--major', '258', '--minor', '772', '--write', str(new))
    assert r.returncode == 0, r.stderr
    doc = json.loads(new.read_text())
    assert doc['uuid'] == UUID and doc['measuredPower'] == -61 and 'calibration' in doc


def test_refusals_leave_the_profile_untouched(harness_factory, ibeacon_bin, tmp_path):
    p = write_profile(tmp_path / 'p.json')
    before = p.read_bytes()
    # Not heard: no beacon on the air.
    h = harness_factory('--rssi', 'constant:-59')
    r = calibrate(ibeacon_bin, h, '--profile', str(p), '--duration', '3')
    assert r.returncode == 68 and 'was not heard' in r.stderr, (r.returncode, r.stderr)
    # RSSI not available.
    h = harness_factory('--rssi', 'na', '--beacon', f'{UUID},258,772,-59,100')
    r = calibrate(ibeacon_bin, h, '--profile', str(p), '--duration', '5')
    assert r.returncode == 69 and 'RSSI not available' in r.stderr, (r.returncode, r.stderr)
    # Two transmitters with the same identity.
    h = harness_factory('--rssi', 'constant:-59', '--beacon', f'{UUID},258,772,-59,100,D0:00:00:00:00:01',
                        '--beacon', f'{UUID},258,772,-59,100,D0:00:00:00:00:02')
    r = calibrate(ibeacon_bin, h, '--profile', str(p), '--duration', '5')
    assert r.returncode == 65, (r.returncode, r.stderr)
    assert 'D0:00:00:00:00:01' in r.stderr and 'D0:00:00:00:00:02' in r.stderr, r.stderr
    assert p.read_bytes() == before
    # --address picks one of them.
    r = calibrate(ibeacon_bin, h, '--profile', str(p), '--address', 'D0:00:00:00:00:02', '--json')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)['address'] == 'D0:00:00:00:00:02'
    # Read-only profile: refused at once, before scanning.
    before = p.read_bytes()
    os.chmod(p, 0o444)
    started = time.monotonic()
    r = calibrate(ibeacon_bin, h, '--profile', str(p), '--address', 'D0:00:00:00:00:02')
    os.chmod(p, 0o644)
    assert r.returncode == 73 and 'read-only' in r.stderr, (r.returncode, r.stderr)
    assert time.monotonic() - started < 3
    assert p.read_bytes() == before


@pytest.mark.parametrize('part', range(4))
def test_sigkill_at_random_moments_never_damages_the_profile(harness_factory, ibeacon_bin, tmp_path, part):
    """100 calibrations killed with SIGKILL at random moments (fixed seeds), many of them while
    the file is being written (a 200 KB unknown key makes the write take measurable time):
    the profile is always exactly the old bytes or a complete new version. In four parts of
    25, so that the parts run beside each other under `make e2e`'s parallel workers."""
    h = harness_factory('--rssi', 'constant:-59', '--beacon', f'{UUID},258,772,-59,20')
    p = write_profile(tmp_path / 'p.json', big='x' * 200_000)
    # About a second of samples (one whole second after the first report), written with --force
    # (under Apple's 10 s minimum), so 100 runs fit.
    quick = ['--duration', '1.5', '--force']
    # How long one calibration takes here, to aim the kills.
    t0 = time.monotonic()
    r = calibrate(ibeacon_bin, h, '--profile', str(p), *quick)
    assert r.returncode == 0, r.stderr
    typical = time.monotonic() - t0
    rng = random.Random(7 + part)
    kills = 25
    outcomes = {'old': 0, 'new': 0}
    for i in range(kills):
        old = p.read_bytes()
        proc = subprocess.Popen([str(ibeacon_bin), 'calibrate', '--device', h.device_spec, '--profile', str(p), *quick],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Half the kills anywhere in the run, half around its end, where the file is written.
        time.sleep(rng.uniform(0, typical + 0.2) if i % 2 else rng.uniform(typical - 0.15, typical + 0.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        now = p.read_bytes()
        if now == old:
            outcomes['old'] += 1
        else:
            doc = json.loads(now)  # must parse: a complete new version
            assert doc['uuid'] == UUID and doc['big'] == 'x' * 200_000 and 'calibration' in doc
            outcomes['new'] += 1
        time.sleep(0.05)
    leftovers = [f.name for f in tmp_path.iterdir() if f.name != 'p.json']
    print(f'outcomes {outcomes}, temporary files left by killed processes: {len(leftovers)}')
    assert outcomes['old'] + outcomes['new'] == kills
    # A killed writer leaves its temporary file, and the one that held the lock its lock file
    # (no lock is held on it any more: the next writer takes and then removes it).
    assert all(name.startswith('.p.json.tmp-') or name == '.p.json.lock' for name in leftovers), leftovers
    # The next successful write removes what the killed writers left behind.
    r = calibrate(ibeacon_bin, h, '--profile', str(p), *quick)
    assert r.returncode == 0, r.stderr
    assert [f.name for f in tmp_path.iterdir()] == ['p.json']


@pytest.mark.parametrize('command', ['reset', 'hwerror'])
def test_calibration_survives_a_controller_reset(harness_factory, ibeacon_bin, tmp_path, command):
    """The receiving controller is reset (or reports a Hardware Error) two seconds into the
    measurement: calibrate starts scanning again, keeps the samples it has, and still writes a
    measured power within 1 dB."""
    h = harness_factory('--rssi', 'gauss:-59,4', '--seed', '5', '--beacon', f'{UUID},258,772,-59,100')
    p = write_profile(tmp_path / 'p.json')
    proc = subprocess.Popen([str(ibeacon_bin), 'calibrate', '--device', h.device_spec, '--profile', str(p), '--json',
                             '--precision', '0.7'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    assert proc.poll() is None, proc.communicate()
    h.send(command)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert 'scanning again' in err and 'scanning resumed' in err, err
    result = json.loads(out)
    assert abs(result['estimate'] - TRUE_POWER) <= 1.0, result
    assert json.loads(p.read_text())['measuredPower'] == result['measuredPower']
