"""Every command README.md shows in a code block is run here, in the README's order, as a store
person would type it: `ibeacon …` against the emulated controller (Bumble, tests/harness), the
file commands (`cp`, `tee`, `chmod`) in a scratch directory that stands for /etc/ibeacon. What
cannot run here (installing a package, systemd, a second box) is listed in NOT_RUN with the
reason, and still checked: the shell parses it, and what it names exists (the unit template, the
make target, the package's group, the files an earlier command wrote). A command added to the
README and neither run nor listed makes `test_every_readme_command_is_run_or_listed` fail.

The substitutions, all of them: `/etc/ibeacon/` → the scratch directory; `--device hciN` → the
emulated controller (`tcp:127.0.0.1:PORT`), and `$IBEACON_DEVICE` the same for commands without
`--device`; `sudo ` dropped (the tests run as root); `$IBEACON_RUNTIME_DIR` a directory of the
test's own."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path


from support import wait_until

REPO = Path(__file__).resolve().parents[2]
README = REPO / 'README.md'

#: The beacons the README's profiles describe, advertised by the harness' peer beacons so that
#: scan, calibrate and monitor hear them: store12.json (made by `profile new`) and the bakery's.
README_UUID = 'F7826DA6-4FA2-4E98-8024-BC5B71E0893E'
PEER_BEACONS = [f'{README_UUID},12,1,-59,100', f'{README_UUID},12,7,-59,100']

#: Each `## ` section runs in a directory of its own (another box, or another day: /etc/ibeacon
#: is shared); these are the files its prose says the reader already has there.
PROFILES = {
    'store12.json': ['--uuid', README_UUID, '--major', '12', '--minor', '1', '--name', 'Store 12 entrance'],
    'store12-bakery.json': ['--uuid', README_UUID, '--major', '12', '--minor', '7', '--name', 'bakery'],
}
PREPARED = {
    'Install': ['store12.json'],  # "drop the spot's profile"
    'Calibrating a spot': ['store12.json'],  # the copy the `scp` before it fetched
    "Monitoring the store's beacons": ['store12.json', 'store12-bakery.json'],
}

#: Commands that run until stopped: started, given until their first line of output, then
#: SIGINT, which ends each with 0.
LONG_RUNNING = {'advertise', 'scan', 'monitor'}

#: Exit codes other than 0 a command may end with here, and why.
EXPECTED_EXIT = {
    'ibeacon devices': ({0, 69}, "lists the kernel's adapters; this machine's kernel may have no Bluetooth (69)"),
}


def _unit_exists(command: str) -> bool:
    units = re.findall(r'(ibeacon(?:-monitor)?)@([\w-]+)', command)
    return bool(units) and all((REPO / 'contrib' / f'{unit}@.service').is_file() for unit, _ in units)


def _make_help_lists(*targets: str) -> bool:
    r = subprocess.run(['make', '--no-print-directory', '-s', 'help'], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    listed = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
    return set(targets) <= listed


def _version() -> str:
    source = (REPO / 'Sources/IBeaconCore/MQTT.swift').read_text()
    return re.search(r'public static let version = "([^"]+)"', source).group(1)


def _group_created_by_postinst(group: str) -> bool:
    return f'addgroup --system --quiet {group}' in (REPO / 'contrib/debian/postinst').read_text()


def _default_variable(name: str) -> bool:
    """A variable the units read from /etc/default/ibeacon."""
    units = ''.join((REPO / 'contrib' / u).read_text() for u in ('ibeacon@.service', 'ibeacon-monitor@.service'))
    return f'${name}' in units or '${' + name + '}' in units or name in (REPO / 'contrib/ibeacon.default').read_text()


#: Commands not run, the reason, and what is checked instead (given the scratch directory that
#: stands for /etc/ibeacon, after every runnable command before it ran).
NOT_RUN: dict[str, tuple[str, object]] = {
    'make run': ('builds the release binary and advertises until stopped: tests/e2e/test_make_run.py runs it',
                 lambda etc: _make_help_lists('run')),
    'make test': ('the whole test suite, this test included', lambda etc: _make_help_lists('test')),
    'sudo apt install ./ibeacon_0.1.0_arm64.deb': (
        'installs the package into the system: `make deb-test` installs it into clean Debian roots',
        lambda etc: _version() == '0.1.0'),
    'sudo adduser alice ibeacon': ('changes the system\'s users', lambda etc: _group_created_by_postinst('ibeacon')),
    'scp ibeacon_0.1.0_arm64.deb pi@store12-entrance:': ('needs a second box', lambda etc: _version() == '0.1.0'),
    'sudo systemctl enable --now ibeacon@store12': (
        'systemd: the units run in the booted VM (make deb-boot)',
        lambda etc: _unit_exists('ibeacon@store12') and (etc / 'store12.json').is_file()),
    'systemctl status ibeacon@store12': ('systemd', lambda etc: _unit_exists('ibeacon@store12')),
    'journalctl -u ibeacon@store12': ('systemd\'s journal', lambda etc: _unit_exists('ibeacon@store12')),
    'sudo systemctl restart ibeacon@store12': (
        'systemd', lambda etc: _unit_exists('ibeacon@store12') and (etc / 'store12.json').is_file()),
    'scp pi@store12-entrance:/etc/ibeacon/store12.json .': ('needs a second box', lambda etc: True),
    'scp store12.json pi@store12-entrance:': ('needs a second box', lambda etc: True),
    "ssh pi@store12-entrance 'sudo cp store12.json /etc/ibeacon/store12.json && sudo systemctl restart "
    "ibeacon@store12'": ('needs a second box', lambda etc: _unit_exists('ibeacon@store12')),
    'sudo systemctl enable --now ibeacon-monitor@store12': (
        'systemd', lambda etc: _unit_exists('ibeacon-monitor@store12') and (etc / 'store12.monitor').is_file()),
    'journalctl -u ibeacon-monitor@store12': ('systemd\'s journal', lambda etc: _unit_exists('ibeacon-monitor@store12')),
    'IBEACON_MQTT_ARGS=--mqtt mqtts://box-store12@mqtt.chain.example --mqtt-base chain/store12': (
        'a line of /etc/default/ibeacon, not a command (its options are parsed in test_the_listed_settings_parse)',
        lambda etc: _default_variable('IBEACON_MQTT_ARGS')),
    'sudo ibeacon calibrate --profile /etc/ibeacon/store12.json --device btsnoop:btsnoop_hci.log': (
        'needs a phone\'s log of this beacon: test_captures.py and test_pklg.py calibrate from real phone logs and '
        'PacketLogger files, writing the profile', lambda etc: (etc / 'store12.json').is_file()),
    'sudo ibeacon calibrate --profile /etc/ibeacon/store12.json --device pklg:bluetoothd-hci-latest.pklg': (
        'needs an iPhone\'s trace of this beacon: test_pklg.py calibrates from PacketLogger files',
        lambda etc: (etc / 'store12.json').is_file()),
    'IBEACON_MQTT_PASSWORD=… ibeacon calibrate --profile store12.json --mqtt mqtts://operator@mqtt.chain.example '
    '--mqtt-base chain/store12 --apply-to store12': (
        'needs a broker and a box that advertises with --mqtt-control: test_calibrate_apply.py runs it against a '
        'real mosquitto and box', lambda etc: (etc / 'store12.json').is_file()),
    'IBEACON_MQTT_PASSWORD=…': ('a line of /etc/default/ibeacon (the password itself elided)',
                                lambda etc: _default_variable('IBEACON_MQTT_PASSWORD')),
}

#: File commands run as shown (in the scratch directory).
FILE_COMMANDS = {'cp', 'tee', 'chmod', 'echo'}


@dataclass
class Command:
    text: str  # as the README shows it, comments dropped, continuation lines joined
    line: int
    section: str = ''

    @property
    def key(self) -> str:
        """The command on one line with single spaces (a here-document: its first line)."""
        return ' '.join(self.text.split('\n', 1)[0].split())

    @property
    def words(self) -> list[str]:
        words = shlex.split(self.text.split('\n', 1)[0].rstrip('\\'), comments=False)
        return words[1:] if words[:1] == ['sudo'] else words


def strip_comment(line: str) -> str:
    """`cmd   # comment` → `cmd` (a `#` after white space, outside quotes)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in '\'"':
            quote = c
        elif c == '#' and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def readme_commands(text: str) -> list[Command]:
    """The commands of every ```sh block: comments dropped, `\\` and trailing `|` continuations
    joined, a here-document kept whole with its command."""
    commands: list[Command] = []
    lines = text.split('\n')
    i = 0
    inside = False
    section = ''
    while i < len(lines):
        raw = lines[i]
        if not inside and raw.startswith('## '):
            section = raw[3:].strip()
        if raw.lstrip().startswith('```'):
            inside = not inside
            i += 1
            continue
        line = strip_comment(raw) if inside else ''
        if not line.strip():
            i += 1
            continue
        start = i + 1
        parts = [line.strip()]
        while parts[-1].endswith('\\') or parts[-1].endswith('|'):
            i += 1
            parts[-1] = parts[-1].rstrip('\\').rstrip() if parts[-1].endswith('\\') else parts[-1]
            parts.append(strip_comment(lines[i]).strip())
        command = ' '.join(parts)
        heredoc = re.search(r"<<-?'?(\w+)'?", command)
        if heredoc:
            body = []
            i += 1
            while lines[i].strip() != heredoc.group(1):
                body.append(lines[i])
                i += 1
            command = '\n'.join([command, *body, heredoc.group(1)])
        commands.append(Command(command, start, section))
        i += 1
    return commands


def classify(command: Command) -> str:
    if command.key in NOT_RUN:
        return 'listed'
    words = command.words
    if words[:1] == ['ibeacon']:
        return 'ibeacon'
    if words[:1] and words[0] in FILE_COMMANDS:
        return 'file'
    return 'unknown'


def test_the_extraction_finds_commands_comments_continuations_and_heredocs() -> None:
    sample = (
        'Prose `ibeacon not-a-block`.\n```sh\nibeacon a --x 1   # comment with `ibeacon b`\n'
        'ibeacon c \\\n    --d "e # f"\n# a comment line\necho \'x\' |\n  sudo tee y\n'
        "cat <<'END'\n# kept\nEND\n```\n")
    assert [c.text for c in readme_commands(sample)] == [
        'ibeacon a --x 1', 'ibeacon c --d "e # f"', "echo 'x' | sudo tee y", "cat <<'END'\n# kept\nEND"]


def test_a_command_neither_runnable_nor_listed_is_caught() -> None:
    """What makes the next test fail when the README gains a command nobody runs."""
    assert classify(Command('sudo systemctl daemon-reload', 1)) == 'unknown'
    assert classify(Command('sudo ibeacon stop --device hci0', 1)) == 'ibeacon'
    assert classify(Command('sudo systemctl enable --now ibeacon@store12', 1)) == 'listed'


def test_every_readme_command_is_run_or_listed() -> None:
    commands = readme_commands(README.read_text(encoding='utf-8'))
    assert len(commands) >= 20, [c.text for c in commands]
    unknown = [f'README.md:{c.line}: {c.key}' for c in commands if classify(c) == 'unknown']
    assert not unknown, ('commands README.md shows that this test neither runs nor lists in NOT_RUN (with the '
                         f'reason and a check): {unknown}')
    stale = set(NOT_RUN) - {c.key for c in commands}
    assert not stale, f'NOT_RUN lists commands README.md no longer shows: {sorted(stale)}'
    for c in commands:
        syntax = subprocess.run(['bash', '-n', '-c', c.text], capture_output=True, text=True)
        assert syntax.returncode == 0, f'README.md:{c.line}: {c.key}: {syntax.stderr}'


def substitute(text: str, etc: Path, device: str) -> str:
    text = text.replace('/etc/ibeacon/', f'{etc}/')
    text = re.sub(r'--device hci\d+\b', f'--device {device}', text)
    return re.sub(r'(^|[\s|&;(])sudo ', r'\1', text)


def section_dir(section: str) -> str:
    return 'section-' + (re.sub(r'[^a-z0-9]+', '-', section.lower()).strip('-') or 'top')


def run_ibeacon(ibeacon_bin: Path, command: Command, etc: Path, cwd: Path, env: dict[str, str], device: str) -> str:
    """Runs one `ibeacon …` command; returns what it printed. Fails the test on a bad exit."""
    words = shlex.split(substitute(command.text, etc, device))
    assert words[0] == 'ibeacon'
    argv = [str(ibeacon_bin), *words[1:]]
    where = f'README.md:{command.line}: {command.key}'
    if words[1] in LONG_RUNNING:
        out, err = cwd / 'long.out', cwd / 'long.err'
        with open(out, 'w') as o, open(err, 'w') as e:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        try:
            printed = wait_until(lambda: out.read_text().strip() or proc.poll() is not None, timeout=20)
            assert printed and proc.poll() is None, f'{where}: rc={proc.poll()} {out.read_text()} {err.read_text()}'
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert rc == 0, f'{where}: SIGINT ended it with {rc}: {err.read_text()}'
        return out.read_text()
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    allowed, _ = EXPECTED_EXIT.get(command.key, ({0}, ''))
    assert result.returncode in allowed, f'{where}: exit {result.returncode}: {result.stderr}'
    return result.stdout


def test_every_readme_command_runs(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    harness = harness_factory('--scanner', *[a for b in PEER_BEACONS for a in ('--beacon', b)],
                              '--rssi', 'gauss:-59,1', '--seed', '7')
    etc = tmp_path / 'etc-ibeacon'
    etc.mkdir()
    runtime = tmp_path / 'run'
    runtime.mkdir(mode=0o755)
    env = {**os.environ, 'IBEACON_DEVICE': harness.device_spec, 'IBEACON_RUNTIME_DIR': str(runtime)}
    work = None
    ran: list[str] = []
    for command in readme_commands(README.read_text(encoding='utf-8')):
        if work is None or work.name != section_dir(command.section):
            work = tmp_path / section_dir(command.section)
            work.mkdir()
            for name in PREPARED.get(command.section, []):
                subprocess.run([str(ibeacon_bin), 'profile', 'new', name, *PROFILES[name]], cwd=work, env=env,
                               check=True, capture_output=True)
        kind = classify(command)
        if kind == 'ibeacon':
            printed = run_ibeacon(ibeacon_bin, command, etc, work, env, harness.device_spec)
            ran.append(command.key)
            if command.words[:2] == ['ibeacon', 'calibrate']:
                profile = json.loads((work / 'store12.json').read_text() if 'store12.json' in command.key
                                     and '/etc/' not in command.key else (etc / 'store12.json').read_text())
                assert profile['measuredPower'] in range(-61, -56), (command.key, profile, printed)
        elif kind == 'file':
            r = subprocess.run(['bash', '-e', '-c', substitute(command.text, etc, harness.device_spec)], cwd=work,
                               env=env, capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, f'README.md:{command.line}: {command.key}: {r.stderr}'
            ran.append(command.key)
        else:
            reason, check = NOT_RUN[command.key]
            assert check(etc), f'README.md:{command.line}: {command.key} (not run: {reason}): its check failed'
    runnable = [c.key for c in readme_commands(README.read_text(encoding='utf-8')) if classify(c) != 'listed']
    assert ran == runnable
    # What the alarm section wrote is what the monitor unit reads, and the hook runs.
    assert os.access(etc / 'alarm', os.X_OK)
    assert (etc / 'store12.monitor').read_text().startswith('MONITOR_ARGS=')
    assert any(k.startswith('ibeacon status') for k in ran) and any(k.startswith('ibeacon calibrate') for k in ran)


def test_the_listed_settings_parse(ibeacon_bin: Path, tmp_path: Path) -> None:
    """The option lines README.md shows for /etc/default/ibeacon and for a monitor's
    MONITOR_ARGS are accepted by the commands the units pass them to: run against a port where
    nothing listens, they fail for want of a controller (69), not as usage errors (64)."""
    readme = README.read_text(encoding='utf-8')
    mqtt = re.search(r'^IBEACON_MQTT_ARGS=(.*)$', readme, re.MULTILINE).group(1)
    monitor = re.search(r"MONITOR_ARGS=([^']*)'", readme).group(1)
    profile = tmp_path / 'p.json'
    subprocess.run([str(ibeacon_bin), 'profile', 'new', str(profile), '--major', '1', '--minor', '2'], check=True,
                   capture_output=True)
    (tmp_path / 'alarm').write_text('#!/bin/sh\n')
    (tmp_path / 'alarm').chmod(0o755)
    dead = 'tcp:127.0.0.1:1'
    for argv in (['advertise', '--profile', str(profile), *shlex.split(mqtt)],
                 ['monitor', *shlex.split(monitor.replace('/etc/ibeacon/store12-bakery.json', str(profile))
                                          .replace('/etc/ibeacon/alarm', str(tmp_path / 'alarm')))]):
        r = subprocess.run([str(ibeacon_bin), *argv, '--device', dead], capture_output=True, text=True, timeout=30,
                           env={**os.environ, 'IBEACON_MQTT_PASSWORD': 'x'})
        assert r.returncode == 69, (argv, r.returncode, r.stderr)
