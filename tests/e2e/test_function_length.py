"""scripts/function-length.py: the rule that CLI functions stay under 60 code lines (issue 15).

The checker is fed Swift that trips naive brace counting (braces in strings, interpolations,
comments, protocol requirements, `.init(` calls, default-argument closures), and then run over
Sources/ibeacon as `make lint` runs it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import script

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / 'scripts' / 'function-length.py'

function_length = script(SCRIPT)


def lengths(source: str) -> dict[str, int]:
    return {f.name: f.length for f in function_length.functions(source)}


def body(n: int) -> str:
    return ''.join(f'    let v{i} = {i}\n' for i in range(n))


def test_counts_code_lines_between_the_braces() -> None:
    source = 'func f() {\n' + body(3) + '\n    // a comment\n\n    /* block\n       comment */\n}\n'
    assert lengths(source) == {'f': 3}


def test_braces_in_strings_comments_and_multiline_strings_do_not_count() -> None:
    source = (
        'struct S {\n'
        '    func a() {\n'
        '        let s = "}}} {"\n'
        '        // }\n'
        '        let t = """\n'
        '            } {\n'
        '            """\n'
        '        let r = #"a "}" b"#\n'
        '    }\n'
        '    func b() { }\n'
        '}\n'
    )
    # Every line of the multi-line string literal holds code; the comment line does not.
    assert lengths(source) == {'S.a': 5, 'S.b': 0}


def test_closures_in_interpolations_belong_to_the_function() -> None:
    source = 'func f() {\n    print("\\(xs.map { x in\n        x + 1\n    })")\n}\nfunc g() {}\n'
    assert lengths(source) == {'f': 3, 'g': 0}


def test_requirements_calls_and_default_closures() -> None:
    source = (
        'protocol P {\n'
        '    func required()\n'
        '    init(x: Int)\n'
        '}\n'
        'extension Outer.Inner {\n'
        '    init?(y: Int, f: () -> Void = { }) where T: P {\n'
        '        let c = Config.init(a: 1)\n'
        '        self.init(c)\n'
        '    }\n'
        '    static func == (l: Self, r: Self) -> Bool { true }\n'
        '    subscript(i: Int) -> Int {\n'
        '        i\n'
        '    }\n'
        '}\n'
        'private let once: Void = {\n'
        '    setUp()\n'
        '}()\n'
    )
    assert lengths(source) == {'Inner.init': 2, 'Inner.==': 0, 'Inner.subscript': 1, 'closure': 1}


def test_a_command_run_closure_counts_towards_run(tmp_path: Path) -> None:
    source = 'struct C {\n    func run() async throws {\n        try await reporting {\n' + body(61) + '        }\n    }\n}\n'
    path = tmp_path / 'C.swift'
    path.write_text(source)
    out = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stdout == f'{path}:2: C.run has 63 lines (more than 60): split it into named steps\n'
    ok = subprocess.run([sys.executable, str(SCRIPT), '--max', '63', str(path)], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout == ''


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / 'nope')], capture_output=True, text=True)
    assert out.returncode == 2
    assert 'nope: no such file or folder' in out.stderr


def test_no_cli_function_is_over_60_lines() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(REPO_ROOT / 'Sources' / 'ibeacon')], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
