"""What is written in one place. The version, in VERSION: the packaging reads it (mk/deb.mk's DEB_VERSION names
ibeacon_VERSION_ARCH.deb, scripts/deb/build.sh writes it into the control file), and the Swift
constant the binary prints (ProgramInfo.version in Sources/IBeaconCore/MQTT.swift: `--version`,
Home Assistant's sw_version) must say the same. The shared captures, through one setting
(IBEACON_CAPTURES), with no machine's absolute path in the tree."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SWIFT_CONSTANT = re.compile(r'enum ProgramInfo \{.*?static let version = "([^"]*)"', re.DOTALL)


def version_file() -> str:
    text = (REPO / 'VERSION').read_text(encoding='ascii')
    assert re.fullmatch(r'\d+\.\d+\.\d+(~[0-9A-Za-z.]+)?\n', text), f'VERSION: {text!r} (one line, like 1.2.3)'
    return text.strip()


def swift_constant() -> str:
    found = SWIFT_CONSTANT.search((REPO / 'Sources' / 'IBeaconCore' / 'MQTT.swift').read_text(encoding='utf-8'))
    assert found, 'no ProgramInfo.version in Sources/IBeaconCore/MQTT.swift'
    return found.group(1)


def make_variable(name: str) -> str:
    out = subprocess.run(['make', '-s', '--no-print-directory', '-C', str(REPO),
                          '--eval', f'print-var: ; @echo $({name})', 'print-var'],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_the_swift_constant_is_the_version_file() -> None:
    assert swift_constant() == version_file(), \
        'ProgramInfo.version (Sources/IBeaconCore/MQTT.swift) differs from VERSION: set both'


def test_the_package_is_named_after_the_version_file() -> None:
    assert make_variable('DEB_VERSION') == version_file()
    assert make_variable('DEB_FILE').endswith(f'/ibeacon_{version_file()}_{make_variable("ARCH")}.deb')


def test_the_binary_prints_the_version_file(ibeacon_bin: Path) -> None:
    out = subprocess.run([str(ibeacon_bin), '--version'], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == version_file()


def test_no_script_reads_the_version_out_of_the_swift_source() -> None:
    """The packaging once took it from MQTT.swift with sed, in two places."""
    readers = [str(p.relative_to(REPO)) for p in [*REPO.glob('mk/*.mk'), REPO / 'Makefile', *REPO.glob('scripts/**/*.sh')]
               if 'MQTT.swift' in p.read_text(encoding='utf-8', errors='replace')]
    assert not readers, f'read the version from VERSION instead: {readers}'


def test_no_machine_path_in_the_tree() -> None:
    """The shared captures are found through IBEACON_CAPTURES (default: beside the repository),
    never through a path of one machine (the CI host's folder of shared files, under /wor[k])."""
    files = subprocess.run(['git', '-C', str(REPO), 'ls-files', '-z'], capture_output=True, text=True,
                           check=True).stdout.split('\0')
    found = [f'{name}:{n}' for name in files if name and (REPO / name).is_file()
             for n, line in enumerate((REPO / name).read_text(encoding='utf-8', errors='replace').splitlines(), 1)
             if re.search(r'(?<![\w.])/wor[k]/', line)]
    assert not found, f'absolute machine paths: {found}'
