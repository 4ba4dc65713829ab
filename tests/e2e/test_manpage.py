"""The man page in the repository (docs/ibeacon.1, `make man`) matches the binary's help.

`make man-check` (in `make lint`) compares it byte for byte with what generate-manual makes
from the binary; this test reads it independently of generate-manual: every subcommand and
every long option that a subcommand's `--help` lists is in the page, and the page documents
no subcommand the binary does not have.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANPAGE = ROOT / 'docs' / 'ibeacon.1'


def _help(ibeacon_bin, *args: str) -> str:
    result = subprocess.run([str(ibeacon_bin), *args, '--help'], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _subcommands(help_text: str) -> list[str]:
    block = help_text.split('SUBCOMMANDS:', 1)[1].split('\n\n', 1)[0]
    # A name sits two spaces in; a description's continuation lines are indented further.
    return [m.group(1) for line in block.splitlines() if (m := re.match(r'^  (\S+)', line))]


def _long_options(help_text: str) -> set[str]:
    options = help_text.split('OPTIONS:', 1)[1] if 'OPTIONS:' in help_text else ''
    return set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]+', options)) - {'--help', '--version'}


def _commands(ibeacon_bin) -> list[tuple[str, ...]]:
    """Every leaf and group command, as argument tuples: ('profile', 'new'), ('scan',), ..."""
    found: list[tuple[str, ...]] = []
    pending = [()]
    while pending:
        path = pending.pop()
        text = _help(ibeacon_bin, *path)
        if path:
            found.append(path)
        if 'SUBCOMMANDS:' in text and len(path) < 3:
            pending += [path + (name,) for name in _subcommands(text) if name != 'help']
    return found


def test_man_page_is_in_the_repository():
    text = MANPAGE.read_text()
    assert text.startswith('.\\"') or '.Dt IBEACON 1' in text, text[:200]
    assert '.Dt IBEACON 1' in text


def test_every_subcommand_and_option_of_the_help_is_in_the_man_page(ibeacon_bin):
    page = MANPAGE.read_text().replace('\\-', '-').replace('\\&', '')
    commands = _commands(ibeacon_bin)
    assert len(commands) >= 9, commands
    missing = []
    for path in commands:
        if not re.search(r'\b' + re.escape(path[-1]) + r'\b', page):
            missing.append(' '.join(path))
        for option in _long_options(_help(ibeacon_bin, *path)):
            # generate-manual writes `--name` as `Fl -name`, or `Fl v , -name` after a short name.
            if not re.search(r'(Fl |, )-' + re.escape(option[2:]) + r'\b', page):
                missing.append(f'{" ".join(path)} {option}')
    assert not missing, f'not in docs/ibeacon.1 (run make man): {missing}'


def test_the_man_page_documents_no_command_the_binary_lacks(ibeacon_bin):
    page = MANPAGE.read_text()
    names = {path[-1] for path in _commands(ibeacon_bin)}
    # generate-manual gives each subcommand an `.It Em NAME` entry.
    documented = set(re.findall(r'^\.It Em ([a-z][a-z-]*)$', page, re.MULTILINE))
    assert documented, 'no subcommand entries found in the page'
    assert documented <= names | {'help'}, documented - names
