"""What a user is told, and the exit code, when the file or device a `--device` names cannot be
opened: missing, a directory, or not readable by the user (run as `nobody`, since root reads
anything). Pinned before the errno → error mapping of the transports was written once."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root to run ibeacon as nobody')

# A btsnoop header (datalink 1002), then nothing: a capture with no records.
HEADER = b'btsnoop\0' + (1).to_bytes(4, 'big') + (1002).to_bytes(4, 'big')
MISSING = ("check the path; a phone's log is copied to this box first (Android: btsnoop_hci.log from its bug report,"
           " iPhone: the .pklg in its sysdiagnose)")
KIND = ('give the path of a capture file: btsnoop (an Android phone\'s btsnoop_hci.log, btmon -w)'
        ' or PacketLogger (.pklg, an iPhone\'s sysdiagnose)')
DIALOUT = 'add your user to the dialout group (sudo usermod -aG dialout $USER) and log in again'


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory nobody may enter, holding a capture and a would-be tty only root may read."""
    d = Path(tempfile.mkdtemp(prefix='ibeacon-open-'))
    d.chmod(0o755)
    (d / 'sub').mkdir()
    for name in ('locked.btsnoop', 'tty0'):
        (d / name).write_bytes(HEADER)
        (d / name).chmod(0o600)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_nobody(ibeacon_bin: Path, device: str) -> tuple[int, str]:
    proc = subprocess.run(['runuser', '-u', 'nobody', '--', str(ibeacon_bin), 'scan', '--device', device,
                           '--duration', '1'], capture_output=True, text=True, timeout=30)
    assert 'Fatal error' not in proc.stderr
    return proc.returncode, proc.stderr.strip()


@pytest.mark.parametrize(('device', 'code', 'message'), [
    ('btsnoop:{d}/none.btsnoop', 66, 'ibeacon: no capture file {d}/none.btsnoop — ' + MISSING),
    ('pklg:{d}/none.pklg', 66, 'ibeacon: no capture file {d}/none.pklg — ' + MISSING),
    ('btsnoop:{d}/sub', 66, 'ibeacon: {d}/sub is a directory, not a capture file — ' + KIND),
    ('pklg:{d}/sub', 66, 'ibeacon: {d}/sub is a directory, not a capture file — ' + KIND),
    ('btsnoop:{d}/locked.btsnoop', 77, 'ibeacon: no permission to read {d}/locked.btsnoop'),
    ('serial:{d}/none', 66, 'ibeacon: no serial device {d}/none — check that the controller is plugged in (ls /dev/tty*)'),
    ('serial:{d}/sub', 74, 'ibeacon: cannot open {d}/sub: Is a directory'),
    ('serial:{d}/tty0', 77, 'ibeacon: no permission to open {d}/tty0 — ' + DIALOUT),
])
def test_open_errors(ibeacon_bin: Path, place: Path, device: str, code: int, message: str) -> None:
    assert as_nobody(ibeacon_bin, device.format(d=place)) == (code, message.format(d=place))
