"""README.md is the operator's document: short, no issue numbers, no CI timings, and it opens with
the two commands that set up a fresh machine. Every `make X` it, docs/*.md, any other Markdown
file or a Makefile's usage comment names is a target `make help` lists; `make help` lists every
target meant for people (the others are INTERNAL, with the reason); every docs/ file it links
exists. Reads files and runs make's help and database only: nothing is built."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / 'README.md'
MAX_LINES = 450

#: Issue references: "issue 41", "issues 11 and 23", "issue #7", "#41".
ISSUE_REFERENCES = [
    re.compile(r'\bissues?\s+#?\d+', re.IGNORECASE),
    re.compile(r'(?<![\w&#/])#\d+\b'),
]

#: How long builds, test runs and CI took on some machine: numbers that change with the machine
#: and belong in docs/DEVELOPING.md, not in the operator's document.
CI_TIMINGS = [
    re.compile(r'\b\d+\s+cores?\b', re.IGNORECASE),                       # "888 s here on 2 cores"
    re.compile(r'\b\d+(\.\d+)?\s*s\s+(here|a run|per run)\b'),             # "694 to 820 s a run"
    re.compile(r'\b(about|took|takes|in)\s+\d+(\s*(to|-|–)\s*\d+)?\s+(minutes?|min|hours?)\b', re.IGNORECASE),
    re.compile(r'\bminutes?\s+(from nothing|with the build directory cached|cached)\b', re.IGNORECASE),
    re.compile(r'\b(measured|timed)\s+(on|here)\b', re.IGNORECASE),
    re.compile(r'\b\d+\s+of\s+\d+\s+passed\b', re.IGNORECASE),             # "5 of 5 passed"
]


def readme() -> str:
    return README.read_text(encoding='utf-8')


def test_readme_is_at_most_450_lines() -> None:
    lines = readme().count('\n')
    assert lines <= MAX_LINES, f'README.md has {lines} lines (at most {MAX_LINES}: move details to docs/)'


def test_readme_names_no_issue_numbers() -> None:
    found = [m.group(0) for pattern in ISSUE_REFERENCES for m in pattern.finditer(readme())]
    assert not found, f'issue references in README.md: {found}'


def test_readme_has_no_ci_timings() -> None:
    found = [m.group(0) for pattern in CI_TIMINGS for m in pattern.finditer(readme())]
    assert not found, f'CI or build timings in README.md (they go in docs/DEVELOPING.md): {found}'


def test_the_patterns_catch_what_the_old_readme_had() -> None:
    """The checks above are not vacuous: each catches a sentence the 967-line README had."""
    old = ('the whole `make test` as root (888 s here on 2 cores, with the root cached); measured on 2 cores: '
           '5 of 5 passed, 694 to 820 s a run; about 10 minutes from nothing, 5 with the build directory cached. '
           'Since issue 25 the derived address; (issue 30, items 6-12); fixed in #41.')
    assert all(p.search(old) for p in CI_TIMINGS[:2] + CI_TIMINGS[3:]), [p.pattern for p in CI_TIMINGS if not p.search(old)]
    assert CI_TIMINGS[2].search('the arm64 package adds 8 to 14 minutes, about 50 minutes on 2 cores')
    assert all(p.search(old) for p in ISSUE_REFERENCES)
    # What an operator needs is not caught: calibration and option durations.
    fine = 'Most runs stop after 10–15 s; at most `--duration` (default 180 s); at least a minute; `#!/bin/sh`'
    assert not any(p.search(fine) for p in CI_TIMINGS + ISSUE_REFERENCES)


def fenced_blocks(text: str) -> tuple[list[str], str]:
    """The lines of the fenced code blocks, and the text outside them."""
    code: list[str] = []
    prose: list[str] = []
    inside = False
    for line in text.split('\n'):
        if line.lstrip().startswith('```'):
            inside = not inside
            continue
        (code if inside else prose).append(line)
    return code, '\n'.join(prose)


def make_targets_named(text: str) -> set[str]:
    """The targets of every `make …` in a code span or a fenced code block: the words after
    `make` up to a comment or shell operator, without variable assignments and options."""
    code, prose = fenced_blocks(text)
    snippets = code + [span.replace('\n', ' ') for span in re.findall(r'`([^`]+)`', prose)]
    targets: set[str] = set()
    for snippet in snippets:
        for m in re.finditer(r'(?:^|[\s;&|(])make((?:[ \t]+[^\s`]+)*)', snippet):
            quoted = ''  # inside a quoted assignment, VM_SCENARIOS="a b": its words are values
            for word in m.group(1).split():
                if quoted:
                    quoted = '' if word.endswith(quoted) else quoted
                    continue
                if word.startswith('#') or word in {'&&', '||', ';', '|', '>', '2>&1', ')'}:
                    break
                if '=' in word or word.startswith('-'):
                    value = word.split('=', 1)[-1]
                    if value[:1] in '"\'' and value and not (len(value) > 1 and value.endswith(value[0])):
                        quoted = value[0]
                    continue
                if not re.fullmatch(r'[a-z][a-z0-9_.-]*', word):
                    break
                targets.add(word)
    return targets


def listed_targets() -> set[str]:
    r = subprocess.run(['make', '--no-print-directory', '-s', 'help'], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}


def test_the_extraction_finds_make_targets() -> None:
    sample = ('Run `make deb ARCH=arm64` then `make deb deb-test`; `make` alone builds.\n'
              '```sh\nsudo make install PREFIX=/usr/local   # and more\nmake run          # build\n```\n'
              'To make sure, `make -j2 test-ha HA_VENV=x && echo ok`.\n'
              '`make test-kernel VM_SCENARIOS="kernel_coexist\nkernel_recovery" vm-run`, `make fuzz X="y" Z=\'a b\' lint`')
    assert make_targets_named(sample) == {'deb', 'deb-test', 'install', 'run', 'test-ha', 'test-kernel', 'vm-run',
                                          'fuzz', 'lint'}


def make_targets_in_makefile_comments(text: str) -> set[str]:
    """The targets a Makefile's comments tell people to run: usage lines (`#   make deb-clean   what
    it does`: the words before the description) and `make …` in backticks."""
    targets: set[str] = set()
    for line in text.split('\n'):
        if not line.startswith('#'):
            continue
        usage = re.match(r'#\s{2,}(make(?: \S+)*)', line)
        snippet = ('```\n' + usage.group(1) + '\n```\n') if usage else ''
        targets |= make_targets_named(snippet + line[1:])
    return targets


def all_targets() -> set[str]:
    """Every target of the Makefile and mk/*.mk, from make's own database (files and patterns left out)."""
    r = subprocess.run(['make', '--no-print-directory', '-pRrq', ':'], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    names = set(re.findall(r'^([a-z][a-z0-9_-]*):', r.stdout, re.MULTILINE))
    return names - {'mk', 'tests', 'scripts', 'docs', 'profiles', 'contrib'}


#: Targets that only other targets, scripts and CI run; every other target is for people and
#: `make help` lists it (a `## description` on its line).
INTERNAL = {
    'venv-deps': 'the virtualenv\'s Debian packages, a prerequisite of venv',
    'deb-cross': 'the arm64 binary, a prerequisite of make deb ARCH=arm64',
    'deb-lint': 'lintian on the .deb, run by make deb',
    'vm-deps': 'the VM\'s host packages, a prerequisite of vm-prepare',
    'vm-prepare': 'the VM\'s kernel and initramfs, a prerequisite of test-kernel and vm-run',
    'print-test-packages': 'the packages list scripts/fresh/run.sh compares the message with',
}
#: mk/debboot.mk belongs to another change, which gives these their `##` lines.
NOT_YET_LISTED: set[str] = set()


def documents() -> list[Path]:
    files = subprocess.run(['git', 'ls-files', '*.md'], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    return [REPO / f for f in files]


def test_the_extraction_finds_make_targets_in_makefile_comments() -> None:
    sample = ('# Debian packages. Included by the main Makefile; `make deb-test` installs it.\n'
              '#   make deb                     ibeacon_VERSION_amd64.deb from `make build`\n'
              '#   make deb-prepare DEB_PREPARE_ARCHS="amd64 arm64"\n'
              '#   make vm-clean                drop the cache\n'
              '# make sure nothing else counts\n'
              'deb: build ## the package\n')
    assert make_targets_in_makefile_comments(sample) == {'deb-test', 'deb', 'build', 'deb-prepare', 'vm-clean'}


def test_every_make_target_in_the_documents_is_listed_by_make_help() -> None:
    """README.md, docs/*.md and every other Markdown file of the repository, and the usage
    comments of the Makefile and mk/*.mk."""
    listed = listed_targets() | NOT_YET_LISTED
    assert {'run', 'test', 'help'} <= listed, listed
    assert {README, REPO / 'docs' / 'DEVELOPING.md', REPO / 'tests' / 'vm' / 'README.md'} <= set(documents())
    named = {(f, t) for f in documents() for t in make_targets_named(f.read_text(encoding='utf-8'))}
    named |= {(f, t) for f in [REPO / 'Makefile', *sorted((REPO / 'mk').glob('*.mk'))]
              for t in make_targets_in_makefile_comments(f.read_text(encoding='utf-8'))}
    missing = sorted(f'{f.relative_to(REPO)}: make {t}' for f, t in named if t not in listed)
    assert not missing, f'targets not listed by `make help` (add a `## description` to the target): {missing}'


def test_make_help_lists_every_target_meant_for_people() -> None:
    targets, listed = all_targets(), listed_targets()
    assert {'test', 'deb', 'test-kernel', 'venv-deps'} <= targets, sorted(targets)
    assert listed <= targets, f'make help lists what is not a target: {sorted(listed - targets)}'
    assert set(INTERNAL) <= targets, f'no longer targets: {sorted(set(INTERNAL) - targets)}'
    unlisted = targets - listed - set(INTERNAL) - NOT_YET_LISTED
    assert not unlisted, (f'targets `make help` does not list: {sorted(unlisted)}; give each a `## description`, '
                          'or, if only other targets run it, add it to INTERNAL with the reason')
    assert not listed & set(INTERNAL), f'listed and internal: {sorted(listed & set(INTERNAL))}'


def test_readme_opens_with_the_two_commands() -> None:
    code, _ = fenced_blocks(readme().split('\n## ', 1)[0])
    commands = [line.split('#')[0].strip() for line in code if line.strip()]
    assert commands == ['make run', 'make test'], commands


def test_the_docs_readme_links_exist() -> None:
    for link in re.findall(r'\]\(([^)#]+)(?:#[^)]*)?\)', readme()):
        if '://' not in link:
            assert (REPO / link).is_file(), f'README.md links to {link}, which does not exist'
