"""Helpers the end-to-end and Home Assistant tests share: the test beacon's identity (lopsided
major and minor, so byte-order mistakes show), the shared captures, running the CLI, writing
profiles, waiting for a condition, and `ibeacon monitor --json` in the background."""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

BEACON_UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
MAJOR = 0x0102  # 258
MINOR = 0x0304  # 772
POWER = -59  # 0xC5

#: The shared third-party captures (btsnoop logs, SOURCES.md): one setting, IBEACON_CAPTURES (the
#: Makefile exports it), by default shared/captures beside the repository, where CI puts them.
CAPTURES = Path(os.environ.get('IBEACON_CAPTURES') or Path(__file__).resolve().parents[2] / 'shared' / 'captures')


def script(path: Path) -> SimpleNamespace:
    """A checker under scripts/ (its file name has dashes: not a module name), run as a module
    would be, for the tests that call its functions; its names as attributes."""
    return SimpleNamespace(**runpy.run_path(str(path), run_name=path.stem.replace('-', '_')))


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


def start_advertising(ibeacon_bin: Path, harness, profile: Path, *args: str, scanner: bool = True):
    """Starts `ibeacon advertise` on the harness and waits for its status line (and, with
    `scanner`, for the peer scanner to hear the beacon). stderr goes to a temporary file (read by
    `stop_process`), so that a chatty process never blocks on a full pipe."""
    import tempfile

    err = tempfile.TemporaryFile(mode='w+')
    proc = subprocess.Popen(
        [str(ibeacon_bin), 'advertise', '--profile', str(profile), '--device', harness.device_spec, *args],
        stdout=subprocess.PIPE, stderr=err, text=True,
    )
    proc.err_file = err  # type: ignore[attr-defined]
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith('advertising'), (line, _read_err(proc))
    if scanner:
        t = time.monotonic()
        harness.wait_for(lambda e: e['event'] == 'adv' and e['t'] >= t, timeout=5)
    return proc


def _read_err(proc) -> str:
    err_file = getattr(proc, 'err_file', None)
    if err_file is not None:
        err_file.seek(0)
        return err_file.read()
    return proc.stderr.read() if proc.stderr is not None else ''


def stop_process(proc, sig: int, timeout: float = 5.0) -> tuple[int | None, float, str, str]:
    """Sends `sig` and waits for the exit: (exit status or None if still running after `timeout`
    and then killed, seconds to exit, stdout, stderr)."""
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        rc: int | None = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        rc = None
        proc.kill()
        proc.wait(timeout=5)
    elapsed = time.monotonic() - t0
    out = ''
    if proc.stdout is not None and not proc.stdout.closed:
        out = proc.stdout.read()
    return rc, elapsed, out, _read_err(proc)


def advertising_disabled(harness, timeout: float = 3.0) -> bool:
    """With the harness' --trace: whether the last advertising-enable command the controller
    received (legacy 0x200A or extended 0x2039) turned advertising off."""

    def last_enable():
        enables = [
            e for e in harness.events('hci')
            if e.get('dir') == 'in' and e.get('opcode') in ('0x200A', '0x2039')
        ]
        return enables[-1] if enables else None

    return wait_until(lambda: (e := last_enable()) is not None and e['data'].startswith('00'), timeout)


def vm_rss_kib(pid: int) -> int:
    """Resident memory of a process in KiB (VmRSS in /proc/PID/status); 0 once it has gone."""
    try:
        with open(f'/proc/{pid}/status') as status:
            for line in status:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Monitor:
    """`ibeacon monitor --json` running in the background; each stdout line is parsed and
    stamped with time.monotonic() when it arrives (the harness uses the same clock)."""

    def __init__(self, ibeacon_bin: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(ibeacon_bin), 'monitor', '--json', *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.events: list[dict[str, Any]] = []
        self.stderr = ''
        self._lock = threading.Lock()
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)  # every stdout line is an event object, nothing else
            event['arrived'] = time.monotonic()
            with self._lock:
                self.events.append(event)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.stderr += line

    def of(self, kind: str | None = None, region: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events
                    if (kind is None or e['event'] == kind) and (region is None or e['region'] == region)]

    def wait_for(self, kind: str, region: str, timeout: float, count: int = 1) -> dict[str, Any]:
        assert wait_until(lambda: len(self.of(kind, region)) >= count, timeout), (
            f'no {kind} of {region} within {timeout} s: {self.events}\n{self.stderr}')
        return self.of(kind, region)[count - 1]

    def wait(self, timeout: float) -> int:
        """Waits for it to end by itself (--duration)."""
        rc = self.proc.wait(timeout=timeout)
        self._out.join(timeout=5)
        self._err.join(timeout=5)
        return rc

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self._out.join(timeout=5)
        self._err.join(timeout=5)
        return rc


def fnv_digest(base: str) -> str:
    """MQTTLayout.baseDigest, written again here: FNV-1a 64 and MurmurHash3's finalizer."""
    mask = (1 << 64) - 1
    h = 0xcbf29ce484222325
    for b in base.encode():
        h = ((h ^ b) * 0x100000001b3) & mask
    h = ((h ^ (h >> 33)) * 0xff51afd7ed558ccd) & mask
    h = ((h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53) & mask
    return f'{(h ^ (h >> 33)) >> 32:08x}'
