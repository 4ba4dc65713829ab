"""Issue 40, hole 1: under file capabilities (AT_SECURE) `-vv`, which logs every packet of
sockets that carry other programs' pairings, is refused and logging falls back to `-v`. The
binary gets cap_net_admin as `make install` grants it and is run by nobody; the same binary
without capabilities still logs packets at -vv.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from support import BEACON_UUID, MAJOR, MINOR

BEACON = f'{BEACON_UUID},{MAJOR},{MINOR},-59,100'



def test_vv_is_refused_under_file_capabilities(ibeacon_bin: Path, harness_factory, shared: Path) -> None:
    if shutil.which('setcap') is None or shutil.which('runuser') is None:
        pytest.skip('setcap (libcap2-bin) or runuser is not installed')
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    installed = shared / 'bin'
    installed.mkdir(mode=0o755)
    plain = installed / 'ibeacon'
    shutil.copy2(ibeacon_bin, plain)
    capped = installed / 'ibeacon-cap'
    shutil.copy2(ibeacon_bin, capped)
    r = subprocess.run(['setcap', 'cap_net_admin+ep', str(capped)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f'setcap failed here: {r.stderr}')

    def nobody(binary: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(['runuser', '-u', 'nobody', '--', str(binary), 'info', '--device', h.device_spec,
                               '-vv'], capture_output=True, text=True, timeout=30)

    r = nobody(plain)
    assert r.returncode == 0, r.stderr
    plain_trace = [line for line in r.stderr.splitlines() if 'trace' in line]
    assert plain_trace, r.stderr[:2000]
    r = nobody(capped)
    assert r.returncode == 0, r.stderr
    assert '-vv (every packet) is refused' in r.stderr, r.stderr[:2000]
    print(f'plain -vv: {len(plain_trace)} trace lines, e.g. {plain_trace[0][:160]!r}; capped: {r.stderr.splitlines()[0][:200]!r}')
    assert not [line for line in r.stderr.splitlines() if 'trace' in line and 'refused' not in line], r.stderr[:3000]
