"""scripts/thin-cli.py: the CLI target imports no module that makes system calls, stays small, and
closes nothing by hand.

The checker is fed Swift in every import form it must catch, and forms it must let through;
`make lint` runs it over Sources/ibeacon.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import script

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / 'scripts' / 'thin-cli.py'

thin_cli = script(SCRIPT)


def modules(source: str) -> list[str]:
    return [module for _, module in thin_cli.violations(source)]


def test_every_import_form_of_a_forbidden_module_is_caught() -> None:
    source = '\n'.join([
        'import Glibc',
        '#if canImport(FoundationEssentials)',
        '    import FoundationEssentials',
        '#else',
        '    import Foundation',
        '#endif',
        '@preconcurrency import Dispatch',
        'import struct Glibc.timespec',
        'import func Darwin.write',
        '@_implementationOnly import CBlueZ',
        'import SystemPackage',
        'import Musl',
        'import FoundationNetworking',
    ])
    assert modules(source) == [
        'Glibc', 'FoundationEssentials', 'Foundation', 'Dispatch', 'Glibc', 'Darwin', 'CBlueZ', 'SystemPackage',
        'Musl', 'FoundationNetworking',
    ]
    assert [line for line, _ in thin_cli.violations(source)] == [1, 3, 5, 7, 8, 9, 10, 11, 12, 13]


def test_the_projects_own_modules_and_look_alikes_pass() -> None:
    source = '\n'.join([
        'import ArgumentParser',
        'import IBeaconCore',
        'import IBeaconHost',
        'import IBeaconTransports',
        'import Logging',
        'import Synchronization',
        '// import Glibc (a comment)',
        'let s = "import Dispatch"',
        'import GlibcHelpers',
        'import DispatchQueueKit',
    ])
    assert modules(source) == []


def test_it_names_the_file_and_line_and_fails(tmp_path: Path) -> None:
    (tmp_path / 'Good.swift').write_text('import IBeaconCore\n')
    (tmp_path / 'Sub').mkdir()
    (tmp_path / 'Sub' / 'Bad.swift').write_text('import ArgumentParser\nimport Dispatch\n')
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout.startswith(f'{tmp_path}/Sub/Bad.swift:2: imports Dispatch: ')
    assert 'Good.swift' not in result.stdout
    clean = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / 'Good.swift')], capture_output=True, text=True)
    assert clean.returncode == 0 and clean.stdout == ''


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert subprocess.run([sys.executable, str(SCRIPT)], capture_output=True).returncode == 2
    missing = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / 'missing.swift')], capture_output=True)
    assert missing.returncode == 2


def test_the_size_rule_counts_each_file_and_the_whole() -> None:
    assert thin_cli.size_violations({f'{n}.swift': 220 for n in range(8)} | {'z.swift': 40}) == []
    assert thin_cli.size_violations({'a.swift': 221}) == ['a.swift: 221 lines (at most 220 a file)']
    assert thin_cli.size_violations({f'{n}.swift': 200 for n in range(9)} | {'z.swift': 1}) == [
        '1801 lines in all (at most 1,800 for the CLI target)']


def test_a_resource_closed_by_hand_is_caught() -> None:
    source = '\n'.join([
        '        await source.close()',
        '        await publisher?.close()',
        '        defer { destination.close() }',
        '        await session.finish(grace: .seconds(5), startQueued: true)',
        '        await status!.finish()',
        '        await makeSource().close()',
        '    func close() async {}',
        '    public func finish(grace: Duration) async {',
        '        // we used to call source.close() here',
        '        try await source.closing { try await body(source) }',
        '        try await session.finishing(grace: grace) { }',
        '        let closed = isClosed()',
    ])
    assert thin_cli.hand_closes(source) == [
        (1, 'close'), (2, 'close'), (3, 'close'), (4, 'finish'), (5, 'finish'), (6, 'close')]


def test_a_hand_close_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / 'Scan.swift').write_text('import IBeaconHost\nfunc f() async {\n    await source.close()\n}\n')
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout.startswith(f'{tmp_path}/Scan.swift:3: closes by hand (close): ')


def test_the_cli_target_keeps_the_size_rule() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), str(REPO_ROOT / 'Sources' / 'ibeacon')], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
