"""Helpers the end-to-end tests share: the test beacon's identity (lopsided major and minor, so
byte-order mistakes show), running the CLI, writing profiles, and waiting for a condition."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Callable

BEACON_UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
MAJOR = 0x0102  # 258
MINOR = 0x0304  # 772
POWER = -59  # 0xC5


def run(ibeacon_bin: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Runs the CLI to completion. Whatever happens, it must exit by itself: not die of a signal
    and not trap (a Swift runtime failure prints "Fatal error")."""
    result = subprocess.run([str(ibeacon_bin), *args], capture_output=True, text=True, timeout=timeout)
    assert 0 <= result.returncode < 128, (result.returncode, result.stderr)
    assert 'Fatal error' not in result.stderr, result.stderr
    return result


def write_profile(path: Path, **fields) -> Path:
    """The test beacon's profile at a 100 ms interval; `fields` override or add keys."""
    doc = {'uuid': BEACON_UUID, 'major': MAJOR, 'minor': MINOR, 'measuredPower': POWER, 'intervalMs': 100}
    doc.update(fields)
    path.write_text(json.dumps(doc, indent=2) + '\n')
    return path


def wait_until(predicate: Callable[[], object], timeout: float, step: float = 0.05) -> bool:
    """Polls `predicate` until it is true (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)
