"""Fixtures for end-to-end tests against the emulated Bluetooth world
(tests/harness/bumble_harness.py).

    def test_x(harness_factory):
        h = harness_factory('--scanner', '--rssi', 'gauss:-59,4')
        h.device_spec            # "tcp:127.0.0.1:PORT" or "serial:/dev/pts/N"
        t0 = time.monotonic()
        ...                      # run ibeacon against h.device_spec
        h.send('reset')          # control command, waits for its ack
        h.wait_for(lambda e: e['event'] == 'adv', timeout=5)
        h.adv_events(since=t0)
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
HARNESS_SCRIPT = REPO_ROOT / 'tests' / 'harness' / 'bumble_harness.py'

Event = dict[str, Any]


class HarnessError(RuntimeError):
    pass


# How long a harness may take to start (Python, Bumble's imports, the emulated controllers):
# about a second on an idle machine, more than 10 s beside two CPU hogs and three other test
# workers starting theirs. A bound for a harness that hangs, not a speed requirement.
READY_TIMEOUT = 60.0


class Harness:
    """The harness subprocess, its JSON-lines events and its control channel."""

    def __init__(self, *args: str, ready_timeout: float = READY_TIMEOUT) -> None:
        self.args = list(args)
        self._lock = threading.Condition()
        self._events: list[Event] = []
        self._ended = False
        self.proc = subprocess.Popen(
            [sys.executable, '-u', str(HARNESS_SCRIPT), *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        try:
            self.ready = self.wait_for(lambda e: e['event'] == 'ready', timeout=ready_timeout)
        except Exception:
            self.close()
            raise
        self.address: str = self.ready['address']
        if 'tcp' in self.ready:
            self.device_spec = f"tcp:{self.ready['tcp']}"
        else:
            self.device_spec = f"serial:{self.ready['pty']}"

    # -- events ------------------------------------------------------------
    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {'event': 'garbled', 'line': line}
            with self._lock:
                self._events.append(event)
                if event.get('event') == 'pty':
                    self.device_spec = f"serial:{event['pty']}"
                self._lock.notify_all()
        with self._lock:
            self._ended = True
            self._lock.notify_all()

    @property
    def tcp_port(self) -> int:
        return int(self.ready['tcp'].rsplit(':', 1)[1])

    @property
    def pty_path(self) -> str:
        return self.device_spec.split(':', 1)[1]

    def events(self, kind: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self._events if kind is None or e.get('event') == kind]

    def adv_events(self, since: float | None = None, address: str | None = None) -> list[Event]:
        """Advertisements heard by the peer scanner (t >= since, time.monotonic())."""
        return [
            e
            for e in self.events('adv')
            if (since is None or e['t'] >= since)
            and (address is None or e['address'].upper() == address.upper())
        ]

    def wait_for(
        self, predicate: Callable[[Event], bool], timeout: float = 5.0, start: int = 0
    ) -> Event:
        """First event (at index >= start) satisfying predicate; TimeoutError if none."""
        deadline = time.monotonic() + timeout
        with self._lock:
            index = start
            while True:
                while index < len(self._events):
                    event = self._events[index]
                    index += 1
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if self._ended:
                    raise HarnessError(f'harness exited (rc={self.proc.poll()}) while waiting')
                if remaining <= 0:
                    raise TimeoutError('no matching harness event')
                self._lock.wait(remaining)

    # -- control -------------------------------------------------------------
    def send(self, cmd: str, timeout: float = 5.0) -> Event:
        """Send a control command (reset, powercycle, hwerror, disconnect, quit); wait for its ack."""
        with self._lock:
            start = len(self._events)
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + '\n')
        self.proc.stdin.flush()
        ack = self.wait_for(
            lambda e: e.get('event') == 'ack' and e.get('cmd') == cmd, timeout=timeout, start=start
        )
        if not ack.get('ok', False):
            raise HarnessError(f'command {cmd!r} refused: {ack}')
        return ack

    def close(self) -> None:
        """Stop the subprocess (by its PID), politely first."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write('quit\n')
                self.proc.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=3)
        self._reader.join(timeout=3)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> 'Harness':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def harness_factory() -> Iterator[Callable[..., Harness]]:
    """Start harnesses with the given arguments; all are stopped at teardown."""
    started: list[Harness] = []

    def start(*args: str, ready_timeout: float = READY_TIMEOUT) -> Harness:
        harness = Harness(*args, ready_timeout=ready_timeout)
        started.append(harness)
        return harness

    yield start
    for harness in started:
        harness.close()


@pytest.fixture
def harness(harness_factory: Callable[..., Harness]) -> Harness:
    """A default harness: DUT on TCP, peer scanner on."""
    return harness_factory('--scanner')


_COPY_FOR_OTHERS: dict[Path, Path] = {}


def pytest_configure(config: pytest.Config) -> None:
    """ibeacon's runtime records (session, instances, scan window) go to a directory of this test
    run, not the host's /run/ibeacon: the tests run as root, and every advertise or monitor they
    start would otherwise leave its session record there for the host's `ibeacon status` to
    report. A test that needs its own directory sets IBEACON_RUNTIME_DIR itself; one given from
    outside is kept."""
    if 'IBEACON_RUNTIME_DIR' in os.environ:
        return
    folder = Path(tempfile.mkdtemp(prefix='ibeacon-run-'))
    folder.chmod(0o755)  # as /run/ibeacon: only its owner writes, others (nobody) read
    atexit.register(shutil.rmtree, folder, True)
    os.environ['IBEACON_RUNTIME_DIR'] = str(folder)


def _others_can_run(path: Path) -> bool:
    """Whether another user (the tests' `nobody`) can reach and run `path`."""
    if not path.stat().st_mode & stat.S_IXOTH:
        return False
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in path.parents)


def _runnable_by_others(path: Path) -> Path:
    """`path`, or, where another user cannot reach it (a clone in root's 0700 home, as on a
    fresh machine), a copy in a directory everyone may enter, made once per run. Several tests
    run the binary as `nobody`."""
    if _others_can_run(path):
        return path
    if path not in _COPY_FOR_OTHERS:
        folder = Path(tempfile.mkdtemp(prefix='ibeacon-bin-'))
        folder.chmod(0o755)
        atexit.register(shutil.rmtree, folder, True)
        copy = folder / path.name
        shutil.copy2(path, copy)
        copy.chmod(0o755)
        _COPY_FOR_OTHERS[path] = copy
    return _COPY_FOR_OTHERS[path]


@pytest.fixture
def ibeacon_bin() -> Path:
    """Path to the ibeacon binary (env IBEACON_BIN, default .build/debug/ibeacon), one that the
    tests' other user can run too."""
    path = Path(os.environ.get('IBEACON_BIN', '.build/debug/ibeacon'))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.exists():
        pytest.fail(f'ibeacon binary not found at {path}; build it or set IBEACON_BIN')
    return _runnable_by_others(path)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A fresh directory with /tmp's mode (1777), outside pytest's private 0700 tmp_path: where
    another user (nobody, runuser) can run a copy of the binary and plant files."""
    d = Path(tempfile.mkdtemp(prefix='ibeacon-shared-'))
    d.chmod(0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)
