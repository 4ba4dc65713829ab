#!/usr/bin/env python3
"""Lists the Swift functions whose bodies are longer than a limit (issue 15: CLI functions over
~60 lines are split into named steps; issue 22: library functions too, so `make lint` runs it
on all of Sources).

    scripts/function-length.py [--max N] [--all] PATH...

A function is a `func`, `init`, `deinit` or `subscript` with a body, or a closure that is a
declaration's initial value (`let x = { ... }()`). Its length is the number of lines between
the line of its opening brace and the line of its closing brace that hold code: blank lines
and lines holding only a comment do not count. Closures inside a function count towards that
function (a command's `run()` is as long as the `reporting { ... }` closure it holds).

Prints `FILE:LINE: NAME has N lines (more than MAX): split it into named steps` for each one
over the limit (with --all, every function and its length) and exits 1 when there is one, 0
otherwise, 2 on a usage error or an unreadable file. Runs on the Python standard library only.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

DECLARATIONS = {'func', 'init', 'deinit', 'subscript'}
TYPE_KEYWORDS = {'struct', 'class', 'enum', 'extension', 'actor', 'protocol'}


@dataclass
class Token:
    kind: str  # 'word', 'punct'
    text: str
    line: int


@dataclass
class Function:
    name: str
    line: int  # of the declaration keyword
    length: int


class Lexer:
    """Splits Swift source into words and punctuation, dropping comments and string contents
    (interpolations inside strings are lexed as code, so a `{` in a string never counts and a
    closure in an interpolation does). Records which lines hold code."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.line = 1
        self.tokens: list[Token] = []
        self.code_lines: set[int] = set()

    def run(self) -> list[Token]:
        self._code(stop_at_paren=False)
        return self.tokens

    def _emit(self, kind: str, text: str) -> None:
        self.tokens.append(Token(kind, text, self.line))
        self.code_lines.add(self.line)

    def _advance(self, n: int = 1) -> None:
        for _ in range(n):
            if self.i < len(self.s) and self.s[self.i] == '\n':
                self.line += 1
            self.i += 1

    def _code(self, stop_at_paren: bool) -> None:
        """Lexes code until the end, or (inside an interpolation) the `)` closing it."""
        depth = 0
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == '\n' or c in ' \t\r':
                self._advance()
            elif s.startswith('//', self.i):
                while self.i < len(s) and s[self.i] != '\n':
                    self.i += 1
            elif s.startswith('/*', self.i):
                self._block_comment()
            elif c == '"' or (c == '#' and self._raw_string_ahead()):
                self.code_lines.add(self.line)
                self._string()
            elif c.isalnum() or c == '_' or c == '$' or c == '@' or c == '`':
                start = self.i
                self.i += 1
                while self.i < len(s) and (s[self.i].isalnum() or s[self.i] in '_`'):
                    self.i += 1
                self._emit('word', s[start:self.i].strip('`'))
            else:
                if stop_at_paren:
                    if c == '(':
                        depth += 1
                    elif c == ')':
                        if depth == 0:
                            self._advance()
                            return
                        depth -= 1
                self._emit('punct', c)
                self._advance()

    def _block_comment(self) -> None:
        nesting = 0
        s = self.s
        while self.i < len(s):
            if s.startswith('/*', self.i):
                nesting += 1
                self._advance(2)
            elif s.startswith('*/', self.i):
                nesting -= 1
                self._advance(2)
                if nesting == 0:
                    return
            else:
                self._advance()

    def _raw_string_ahead(self) -> bool:
        j = self.i
        while j < len(self.s) and self.s[j] == '#':
            j += 1
        return j < len(self.s) and self.s[j] == '"'

    def _string(self) -> None:
        s = self.s
        hashes = 0
        while s[self.i] == '#':
            hashes += 1
            self.i += 1
        multiline = s.startswith('"""', self.i)
        quote = '"""' if multiline else '"'
        self._advance(len(quote))
        close = quote + '#' * hashes
        escape = '\\' + '#' * hashes
        while self.i < len(s):
            if s.startswith(close, self.i):
                self._advance(len(close))
                return
            if s.startswith(escape, self.i):
                self._advance(len(escape))
                if self.i < len(s) and s[self.i] == '(':
                    self._emit('punct', '(')
                    self._advance()
                    self._code(stop_at_paren=True)
                    self._emit('punct', ')')
                else:
                    self._advance()
                continue
            if s[self.i] == '\n' and not multiline:
                return  # unterminated: the compiler reports it; do not swallow the file
            self.code_lines.add(self.line)
            self._advance()


def functions(text: str) -> list[Function]:
    """Every function with a body in `text`, with its length in code lines."""
    lexer = Lexer(text)
    tokens = lexer.run()
    code_lines = lexer.code_lines
    found: list[Function] = []
    # Open braces: (what they open, name, line of the brace, line of the declaration).
    stack: list[tuple[str, str, int, int]] = []
    pending: tuple[str, str, int] | None = None  # (kind, name, line) waiting for its `{`
    paren = 0
    pending_paren = 0
    previous: Token | None = None
    for n, tok in enumerate(tokens):
        nxt = tokens[n + 1] if n + 1 < len(tokens) else None
        if tok.kind == 'word':
            after_dot = previous is not None and previous.text == '.'
            labelled = nxt is not None and nxt.text == ':'
            if tok.text in DECLARATIONS and not after_dot and not labelled:
                name = tok.text
                if tok.text == 'func' and nxt is not None:
                    name = nxt.text
                    # Operators: `func == (`; the name is the punctuation up to `(` or `<`.
                    if nxt.kind == 'punct':
                        m = n + 1
                        ops = ''
                        while m < len(tokens) and tokens[m].kind == 'punct' and tokens[m].text not in '(<':
                            ops += tokens[m].text
                            m += 1
                        name = ops
                pending = ('func', name, tok.line)
                pending_paren = paren
            elif tok.text in TYPE_KEYWORDS and not after_dot and not labelled and nxt is not None:
                if nxt.kind == 'word':
                    # `extension Outer.Inner`: the name is the last component.
                    m = n + 1
                    while m + 2 < len(tokens) and tokens[m + 1].text == '.' and tokens[m + 2].kind == 'word':
                        m += 2
                    pending = ('type', tokens[m].text, tok.line)
                    pending_paren = paren
        else:
            t = tok.text
            if t in '([':
                paren += 1
            elif t in ')]':
                paren = max(0, paren - 1)
            elif t == '{':
                if pending is not None and paren == pending_paren:
                    kind, name, line = pending
                    stack.append((kind, name, tok.line, line))
                    pending = None
                elif (
                    previous is not None
                    and previous.text == '='
                    and paren == 0
                    and not any(k == 'func' for k, *_ in stack)
                ):
                    # A closure as a declaration's value, outside any function.
                    stack.append(('func', 'closure', tok.line, tok.line))
                else:
                    stack.append(('block', '', tok.line, tok.line))
            elif t == '}':
                if stack:
                    kind, name, open_line, decl_line = stack.pop()
                    if kind == 'func':
                        length = sum(1 for ln in range(open_line + 1, tok.line) if ln in code_lines)
                        owner = '.'.join(nm for k, nm, *_ in stack if k == 'type')
                        qualified = f'{owner}.{name}' if owner else name
                        found.append(Function(qualified, decl_line, length))
                if pending is not None and paren <= pending_paren:
                    pending = None  # a body-less requirement at the end of its scope
        previous = tok
    found.sort(key=lambda f: f.line)
    return found


def swift_files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(path.rglob('*.swift')))
        elif path.is_file():
            out.append(path)
        else:
            raise FileNotFoundError(p)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description='List Swift functions longer than --max code lines.')
    parser.add_argument('--max', type=int, default=60, help='the longest body allowed, in code lines (60)')
    parser.add_argument('--all', action='store_true', help='print every function and its length')
    parser.add_argument('paths', nargs='+', help='Swift files or folders (searched for *.swift)')
    args = parser.parse_args(argv)
    try:
        files = swift_files(args.paths)
    except FileNotFoundError as e:
        print(f'function-length: {e}: no such file or folder', file=sys.stderr)
        return 2
    over = 0
    for path in files:
        try:
            text = path.read_text(encoding='utf-8')
        except (OSError, UnicodeDecodeError) as e:
            print(f'function-length: cannot read {path}: {e}', file=sys.stderr)
            return 2
        for f in functions(text):
            if f.length > args.max:
                over += 1
                print(f'{path}:{f.line}: {f.name} has {f.length} lines (more than {args.max}): split it into named steps')
            elif args.all:
                print(f'{path}:{f.line}: {f.name} has {f.length} lines')
    if over:
        print(f'function-length: {over} function(s) over {args.max} lines', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
