#!/usr/bin/env python3
"""Checks that the command-line target stays thin (issue 22): no file under the given paths
imports a module that makes system calls or reads the process's state. Those go through
IBeaconTransports and IBeaconHost, where they can be unit-tested.

    scripts/thin-cli.py PATH...

Forbidden: the C library (Glibc, Musl, Darwin), Dispatch, Foundation in every form
(Foundation, FoundationEssentials, FoundationNetworking, ...), swift-system (SystemPackage,
System) and the C modules (CBlueZ, CMosquitto). Any import form counts: `import Glibc`,
`@preconcurrency import Dispatch`, `import struct Glibc.timespec`, inside `#if` or not.

It also keeps the CLI to parsing and printing by size: no file over 220 lines, and all of them
together at most 1,800; library work goes to Host or Transports, where it is tested.

And every resource the CLI opens is scoped (`withAdapter`, `withSightingSource`, `closing`,
`finishing`, `CalibrationDestination.withOpened`): no hand-written `.close()` or `.finish(` call,
which a thrown error skips unless it is paired with a close-and-rethrow.

Prints `FILE:LINE: imports MODULE: ...` / `FILE:LINE: closes by hand: ...` for each one (and
`FILE: N lines` / `N lines in all` for the size rule) and exits 1 when there is one, 0 otherwise,
2 on a usage error or an unreadable file. Runs on the Python standard library only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

FORBIDDEN = ('Glibc', 'Musl', 'Darwin', 'Dispatch', 'SystemPackage', 'System', 'CBlueZ', 'CMosquitto')
FORBIDDEN_PREFIXES = ('Foundation',)

# `@attr ... import [kind] Module[.Sub]`: attributes, an optional declaration kind, the module.
IMPORT = re.compile(
    r'^\s*(?:@[\w()]+\s+)*import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_]\w*)'
)


MAX_FILE_LINES = 220
MAX_TOTAL_LINES = 1800

# `x.close()`, `x?.close()`, `await x.finish(grace: …)`: a call, not a declaration or a comment.
HAND_CLOSE = re.compile(r'^(?!\s*//)(?!.*\bfunc\s+(?:close|finish)\b).*[\w)\]?!]\.(close|finish)\(')


def size_violations(sizes: dict[str, int]) -> list[str]:
    """What breaks the size rule, given each file's line count."""
    found = [f'{name}: {n} lines (at most {MAX_FILE_LINES} a file)' for name, n in sizes.items()
             if n > MAX_FILE_LINES]
    total = sum(sizes.values())
    if total > MAX_TOTAL_LINES:
        found.append(f'{total} lines in all (at most {MAX_TOTAL_LINES:,} for the CLI target)')
    return found


def hand_closes(source: str) -> list[tuple[int, str]]:
    """(line number, method) of every hand-written `.close()` / `.finish(` call in `source`."""
    found = []
    for number, line in enumerate(source.splitlines(), start=1):
        match = HAND_CLOSE.match(line)
        if match:
            found.append((number, match.group(1)))
    return found


def forbidden(module: str) -> bool:
    return module in FORBIDDEN or module.startswith(FORBIDDEN_PREFIXES)


def violations(source: str) -> list[tuple[int, str]]:
    """(line number, module) of every forbidden import in `source`."""
    found = []
    for number, line in enumerate(source.splitlines(), start=1):
        match = IMPORT.match(line)
        if match and forbidden(match.group(1)):
            found.append((number, match.group(1)))
    return found


def swift_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.rglob('*.swift')) if p.is_dir() else [p])
    return files


def main(argv: list[str]) -> int:
    if not argv or any(a.startswith('-') for a in argv):
        print('usage: scripts/thin-cli.py PATH...', file=sys.stderr)
        return 2
    status = 0
    sizes: dict[str, int] = {}
    for file in swift_files(argv):
        try:
            source = file.read_text(encoding='utf-8')
        except OSError as e:
            print(f'{file}: cannot read: {e.strerror}', file=sys.stderr)
            return 2
        sizes[str(file)] = len(source.splitlines())
        for line, module in violations(source):
            print(
                f'{file}:{line}: imports {module}: the CLI target stays thin (no system calls, files, '
                'environment or clocks of its own); do it in IBeaconTransports or IBeaconHost and call that'
            )
            status = 1
        for line, method in hand_closes(source):
            print(
                f'{file}:{line}: closes by hand ({method}): a thrown error skips it; open the resource in a scope '
                '(withAdapter, withSightingSource, closing, finishing) that closes it on every path'
            )
            status = 1
    for problem in size_violations(sizes):
        print(f'{problem}: the CLI parses and prints; move library work to IBeaconHost or IBeaconTransports')
        status = 1
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
