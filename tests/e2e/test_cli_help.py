"""`ibeacon --help` and every subcommand's `--help` print usage and exit 0."""

from __future__ import annotations

import subprocess

import pytest

SUBCOMMANDS = ['profile', 'encode', 'decode', 'devices', 'info', 'advertise', 'stop', 'status', 'scan', 'calibrate',
               'monitor']


@pytest.mark.parametrize('args', [[]] + [[name] for name in SUBCOMMANDS], ids=lambda a: ' '.join(a) or 'ibeacon')
def test_help_exits_zero(ibeacon_bin, args):
    result = subprocess.run(
        [str(ibeacon_bin), *args, '--help'], capture_output=True, text=True, timeout=20
    )
    assert result.returncode == 0, result.stderr
    assert 'USAGE' in result.stdout.upper(), result.stdout
    if args:
        assert f'ibeacon {args[0]}' in result.stdout


def test_top_level_help_lists_every_subcommand_and_exit_codes(ibeacon_bin):
    result = subprocess.run([str(ibeacon_bin), '--help'], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0
    for name in SUBCOMMANDS:
        assert name in result.stdout
    assert 'EXIT CODES' in result.stdout
