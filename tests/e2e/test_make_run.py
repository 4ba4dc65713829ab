"""`make run` (scripts/run.sh) on a machine without a Bluetooth adapter, as this one is: it says
so and runs the same advertising against the emulated controller, where an independent scanner
decodes the beacon of the profile. The README promises exactly this."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_run_without_an_adapter_falls_back_to_the_emulated_demo(ibeacon_bin: Path) -> None:
    check = subprocess.run([str(ibeacon_bin), 'info', '--device', 'hci0'], capture_output=True, text=True, timeout=30)
    if check.returncode != 69:
        pytest.fail(f'this test expects a machine without Bluetooth (info exits 69), got {check.returncode}')
    env = dict(os.environ, IBEACON_BIN=str(ibeacon_bin), DEMO_SECONDS='3')
    r = subprocess.run(['scripts/run.sh', 'profiles/store12.json', 'hci0'], cwd=REPO, capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert 'No Bluetooth adapter here' in r.stdout, r.stdout
    assert 'emulated controller instead' in r.stdout, r.stdout
    profile = json.loads((REPO / 'profiles' / 'store12.json').read_text())
    seen = [line for line in r.stdout.splitlines() if line.strip().startswith('phone sees: iBeacon')]
    assert seen, r.stdout
    assert f"{profile['uuid'].upper()} major {profile['major']} minor {profile['minor']}" in seen[-1], seen[-1]
    assert f"measured power {profile['measuredPower']} dBm" in seen[-1], seen[-1]
