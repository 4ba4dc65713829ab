"""The options of every command, read from its --help: value names from one small set with the
same name for the same option everywhere and the unit in the name (`<dBm>`, `<dB>`, `<seconds>`,
`<ms>`); and an option either works for a command or is not accepted by it:

- every option a command documents, given a valid value, gets the command past its checks (it
  then fails only for want of a controller, 69, or succeeds): it is not refused;
- every option another command documents and this one does not is refused, exit 64, with a
  message naming the option — never accepted and ignored.

Runs the binary only (no controller: `tcp:127.0.0.1:1`, where nothing listens)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

COMMANDS = ['profile new', 'profile check', 'encode', 'decode', 'devices', 'info', 'advertise', 'stop', 'status',
            'scan', 'calibrate', 'monitor']

#: The value names --help may show, and what each means.
VALUE_NAMES = {
    'dBm': 'a power or RSSI in dBm', 'dB': 'a difference of powers in dB', 'seconds': 'a duration in seconds',
    'ms': 'a duration in milliseconds', 'n': 'a whole number', 'file': 'a path', 'uuid': 'a proximity UUID',
    'spec': 'a --device specification', 'url': 'an MQTT broker URL', 'topic': 'an MQTT topic', 'name': 'a name',
    'text': 'free text', 'command': 'a program and its arguments', 'region': 'a region specification',
    'address': 'a Bluetooth address', 'mode': 'one of the listed modes', 'method': 'one of the listed methods',
    'kind': 'one of the listed kinds',
}

#: Options whose value has a unit, and the unit its value name must say.
UNITS = {
    '--measured-power': 'dBm', '--min-rssi': 'dBm',
    '--offset': 'dB', '--precision': 'dB', '--hysteresis': 'dB', 
    '--interval-ms': 'ms',
    **{o: 'seconds' for o in ('--duration', '--timeout', '--check-interval', '--exit-after', '--forget-after',
                              '--exec-timeout', '--watchdog', '--smoothing', '--state-every', '--confirm-timeout')},
}

DEAD = 'tcp:127.0.0.1:1'
UUID = 'F7826DA6-4FA2-4E98-8024-BC5B71E0893E'
OPTION = re.compile(r'^  (?:-\w, )?(--[a-z0-9-]+)(?: <([^>]+)>)?(?:\s{2,}(.*))?$')


def options_of(ibeacon_bin: Path, command: str) -> dict[str, tuple[str | None, str]]:
    """--help's options: name → (value name or None for a flag, the first line of its help)."""
    out = subprocess.run([str(ibeacon_bin), *command.split(), '--help'], capture_output=True, text=True,
                         timeout=20, env={**os.environ, 'COLUMNS': '200'}).stdout
    section = out.split('\nOPTIONS:\n', 1)[1]
    found: dict[str, tuple[str | None, str]] = {}
    for line in section.split('\n'):
        m = OPTION.match(line)
        if m and m.group(1) not in ('--help', '--version'):
            found[m.group(1)] = (m.group(2), m.group(3) or '')
    return found


@pytest.fixture(scope='module')
def helps(ibeacon_bin_module) -> dict[str, dict[str, tuple[str | None, str]]]:
    return {c: options_of(ibeacon_bin_module, c) for c in COMMANDS}


@pytest.fixture(scope='module')
def ibeacon_bin_module() -> Path:
    path = Path(os.environ.get('IBEACON_BIN', Path(__file__).resolve().parents[2] / '.build/debug/ibeacon'))
    assert path.exists(), path
    return path


def test_every_value_name_is_one_of_the_set_and_the_same_for_an_option_everywhere(helps) -> None:
    assert sum(len(o) for o in helps.values()) >= 80, helps
    seen: dict[str, set[str]] = {}
    bad = []
    for command, options in helps.items():
        for option, (value, _) in options.items():
            if value is None:
                continue
            if value not in VALUE_NAMES:
                bad.append(f'ibeacon {command} {option} <{value}>')
            seen.setdefault(option, set()).add(value)
    assert not bad, f'value names outside {sorted(VALUE_NAMES)}: {bad}'
    differing = {o: v for o, v in seen.items() if len(v) > 1}
    assert not differing, f'one option, several value names: {differing}'


def test_every_option_with_a_unit_says_it_in_its_value_name(helps) -> None:
    wrong = []
    for command, options in helps.items():
        for option, (value, text) in options.items():
            unit = UNITS.get(option)
            if unit and value != unit:
                wrong.append(f'ibeacon {command} {option} <{value}>: the unit is {unit}')
            if value in ('dBm', 'dB', 'seconds', 'ms') and unit is None:
                wrong.append(f'ibeacon {command} {option} <{value}>: add it to UNITS')
            words = set(re.findall(r'[A-Za-z]+', text))
            if value == 'seconds' and words & {'ms', 'milliseconds'}:
                wrong.append(f'ibeacon {command} {option}: <seconds> but its help says {text!r}')
            if value == 'ms' and words & {'s', 'seconds', 'Seconds'}:
                wrong.append(f'ibeacon {command} {option}: <ms> but its help says {text!r}')
    assert not wrong, wrong


# -- an option either works or is refused ------------------------------------------------------

def make_files(tmp: Path, ibeacon_bin: Path) -> dict[str, str]:
    profile = tmp / 'p.json'
    subprocess.run([str(ibeacon_bin), 'profile', 'new', str(profile), '--uuid', UUID, '--major', '1', '--minor', '2'],
                   check=True, capture_output=True)
    secret = tmp / 'secret'
    secret.write_text('x\n')
    secret.chmod(0o600)
    return {'profile': str(profile), 'secret': str(secret), 'new': str(tmp / 'new.json'),
            'btsnoop': str(tmp / 'rec.btsnoop')}


def base_argv(command: str, f: dict[str, str]) -> list[str]:
    """A valid run of `command` that fails only for want of a controller (or succeeds)."""
    return {
        'profile new': ['profile', 'new', f['new'], '--major', '1', '--minor', '2', '--force'],
        'profile check': ['profile', 'check', f['profile']],
        'encode': ['encode', '--uuid', UUID, '--major', '1', '--minor', '2'],
        'decode': ['decode', '0201061aff4c000215' + UUID.replace('-', '') + '00010002c5'],
        'devices': ['devices'],
        'info': ['info', '--device', DEAD],
        'advertise': ['advertise', '--profile', f['profile'], '--device', DEAD],
        'stop': ['stop', '--device', DEAD],
        'status': ['status'],
        'scan': ['scan', '--device', DEAD],
        'calibrate': ['calibrate', '--profile', f['profile'], '--device', DEAD],
        'monitor': ['monitor', '--profile', f['profile'], '--device', DEAD],
    }[command]


def sample_value(option: str, value: str, f: dict[str, str]) -> str:
    """A valid value of the option."""
    by_option = {
        '--profile': f['profile'], '--write': f['new'], '--btsnoop': f['btsnoop'], '--mqtt-password-file': f['secret'],
        '--mqtt-ca': f['secret'], '--mqtt-cert': f['secret'], '--mqtt-key': f['secret'], '--min-rssi': '-80',
        '--measured-power': '-59', '--offset': '2', '--precision': '2', '--hysteresis': '4', '--index': '0',
        '--duration': '30', '--exec': '/bin/true',
    }
    by_value = {'seconds': '20', 'ms': '100', 'n': '3', 'uuid': UUID, 'spec': DEAD, 'url': 'mqtt://127.0.0.1:1',
                'topic': 'chain/store12', 'name': 'box12', 'text': 'entrance', 'region': UUID,
                'address': 'D0:00:00:00:00:01', 'mode': 'legacy', 'method': 'apple', 'kind': 'ad'}
    return by_option.get(option, by_value.get(value, '1'))


#: Options that work only together with another: what is added with them.
TOGETHER = {
    '--reports': ['--json'], '--overwrite-btsnoop': ['--btsnoop', 'BTSNOOP'], '--exec-timeout': ['--exec', '/bin/true'],
    '--exec-shell': ['--exec', 'true'], '--write': ['--uuid', UUID, '--major', '1', '--minor', '2'],
    # Each broker setting needs the broker; the client certificate needs its key.
    **{o: ['--mqtt', 'mqtts://127.0.0.1:1'] for o in (
        '--mqtt-ca', '--mqtt-user', '--mqtt-password-file', '--mqtt-base', '--mqtt-name', '--mqtt-discovery-prefix',
        '--no-mqtt-discovery', '--mqtt-room')},
    '--mqtt-cert': ['--mqtt', 'mqtts://127.0.0.1:1', '--mqtt-key', 'SECRET'],
    '--mqtt-key': ['--mqtt', 'mqtts://127.0.0.1:1', '--mqtt-cert', 'SECRET'],
    # Steering needs the broker; calibrate's result goes to a box under a base.
    '--mqtt-control': ['--mqtt', 'mqtt://127.0.0.1:1'],
    '--apply-to': ['--mqtt', 'mqtt://127.0.0.1:1', '--mqtt-base', 'chain/store12'],
    '--confirm-timeout': ['--apply-to', 'box12', '--mqtt', 'mqtt://127.0.0.1:1', '--mqtt-base', 'chain/store12'],
    # A region's major and minor narrow its UUID.
    '--major': ['--uuid', UUID], '--minor': ['--uuid', UUID, '--major', '1'],
}


def with_option(argv: list[str], option: str, value: str | None) -> list[str]:
    """argv with option set (replacing the base's value of the same option)."""
    out = list(argv)
    if value is not None and option in out:
        out[out.index(option) + 1] = value
        return out
    return out + ([option] if value is None else [option, value])


def run(ibeacon_bin: Path, argv: list[str], runtime: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ibeacon_bin), *argv], capture_output=True, text=True, timeout=30,
                          env={**os.environ, 'IBEACON_RUNTIME_DIR': str(runtime), 'IBEACON_DEVICE': DEAD})


def test_every_documented_option_is_taken(ibeacon_bin: Path, helps, tmp_path: Path) -> None:
    f = make_files(tmp_path, ibeacon_bin)
    runtime = tmp_path / 'run'
    runtime.mkdir(mode=0o755)
    refused = []
    for command, options in helps.items():
        base = base_argv(command, f)
        base_rc = run(ibeacon_bin, base, runtime).returncode
        assert base_rc != 64, (command, base)
        for option, (value, _) in options.items():
            argv = base
            if command == 'calibrate' and option in ('--write', '--uuid', '--major', '--minor'):
                # The beacon from options, written to a new profile, instead of --profile.
                argv = ['calibrate', '--device', DEAD, '--write', f['new'], '--uuid', UUID, '--major', '1',
                        '--minor', '2']
            if command == 'calibrate' and option == '--index':  # a capture is measured, never written
                argv = argv + ['--dry-run']
            for extra in TOGETHER.get(option, []) if option not in argv else []:
                argv = argv + [{'BTSNOOP': f['btsnoop'], 'SECRET': f['secret']}.get(extra, extra)]
            if command == 'calibrate' and option.startswith('--mqtt'):  # calibrate's broker is for --apply-to
                argv = argv + ['--apply-to', 'box12'] + ([] if '--mqtt-base' in argv else ['--mqtt-base', 'x/y'])
                argv = argv + ([] if '--mqtt' in argv else ['--mqtt', 'mqtt://127.0.0.1:1'])
            if command == 'encode' and option == '--profile':  # the identity from a profile, or from options
                argv = ['encode']
            if option == '--index':  # a controller of a capture: only with btsnoop:FILE
                argv = with_option(argv, '--device', f'btsnoop:{f["btsnoop"]}')
            argv = with_option(argv, option, None if value is None else sample_value(option, value, f))
            r = run(ibeacon_bin, argv, runtime)
            if r.returncode == 64:
                refused.append(f'ibeacon {" ".join(argv)}: {r.stderr.strip().splitlines()[0][:200]}')
    assert not refused, 'documented options refused with a valid value:\n' + '\n'.join(refused)


def test_every_option_a_command_does_not_document_is_refused_naming_it(ibeacon_bin: Path, helps,
                                                                      tmp_path: Path) -> None:
    f = make_files(tmp_path, ibeacon_bin)
    runtime = tmp_path / 'run'
    runtime.mkdir(mode=0o755)
    everywhere = {o: v for options in helps.values() for o, (v, _) in options.items()}
    accepted = []
    checked = 0
    for command, options in helps.items():
        base = base_argv(command, f)
        for option, value in sorted(everywhere.items()):
            if option in options:
                continue
            argv = base + ([option] if value is None else [option, sample_value(option, value, f)])
            r = run(ibeacon_bin, argv, runtime)
            checked += 1
            if r.returncode != 64 or option not in r.stderr:
                accepted.append(f'ibeacon {" ".join(argv)} → exit {r.returncode}: {r.stderr.strip()[:200]}')
    assert checked >= 200, checked
    assert not accepted, 'options taken by a command that does not document them:\n' + '\n'.join(accepted)
