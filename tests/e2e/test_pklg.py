"""PacketLogger (.pklg) captures, an iPhone's Bluetooth trace: `scan --device pklg:FILE` compared
report by report with tshark (an independent reader: Wireshark's wiretap/packetlogger.c) on files
nobody here wrote (tests/e2e/data/pklg, SOURCES.md there: an iPhone's own little-endian trace,
BTstack's big-endian ones, real Android captures converted by BTstack's writer), on every shared
Android capture written here in both byte orders, and calibration from a phone's capture: the
measured power Apple's 1 Hz method gives on tshark's RSSI column is written, every other key
kept, and no address the capture holds reaches the profile."""

from __future__ import annotations

import json
import random
import re
import struct
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from support import run
from test_captures import ALL, CAPTURES, DAMAGED, EPOCH_DELTA_US, compare, tshark_reports

DATA = Path(__file__).resolve().parent / 'data' / 'pklg'
REAL = sorted(DATA.glob('*.pklg'))
IPHONE = DATA / 'havvk+even-g2-smart-classroom__tests_bt2.pklg'
ANDROID_BY_BTSTACK = DATA / 'btstack-hci_dump__cnrd+yeelock.pklg'
assert len(REAL) >= 5, f'the .pklg test files are missing from {DATA}'

# PacketLogger types of an H4 packet type and direction (Wireshark's packet-packetlogger.c).
TYPES = {(1, 0): 0x00, (4, 1): 0x01, (2, 0): 0x02, (2, 1): 0x03, (3, 0): 0x08, (3, 1): 0x09}


def pklg_record(kind: int, body: bytes, unix_us: int, big: bool) -> bytes:
    return struct.pack('>III' if big else '<III', 9 + len(body), unix_us // 1_000_000, unix_us % 1_000_000) \
        + bytes([kind]) + body


def btsnoop_to_pklg(data: bytes, big: bool) -> bytes:
    """Every HCI packet of an H4 (1002) btsnoop capture as a PacketLogger record, time kept."""
    assert data[:8] == b'btsnoop\0' and struct.unpack_from('>I', data, 12)[0] == 1002
    out, at = bytearray(), 16
    while at + 24 <= len(data):
        _, included, flags, _, ts = struct.unpack_from('>IIIIq', data, at)
        packet = data[at + 24:at + 24 + included]
        at += 24 + included
        kind = TYPES.get((packet[0], flags & 1)) if packet else None
        if kind is not None:
            out += pklg_record(kind, packet[1:], ts - EPOCH_DELTA_US, big)
    return bytes(out)


def scan_reports(ibeacon_bin: Path, device: str, *args: str):
    result = run(ibeacon_bin, 'scan', '--device', device, '--json', '--reports', '--all', *args, timeout=60)
    return [json.loads(line) for line in result.stdout.splitlines()], result


@pytest.mark.parametrize('capture', REAL, ids=[p.name.split('__')[0] for p in REAL])
def test_real_pklg_files_agree_with_tshark(ibeacon_bin: Path, capture: Path) -> None:
    """Read as pklg:FILE and as capture:FILE (told apart by content), each report is the one
    tshark shows. The iPhone's trace has none (its controller reports in vendor events): both
    readers agree on that, and ibeacon says why."""
    theirs = tshark_reports(capture)
    for prefix in ('pklg', 'capture'):
        ours, result = scan_reports(ibeacon_bin, f'{prefix}:{capture}')
        assert result.returncode == 0, result.stderr
        compare(ours, theirs)
    if capture == IPHONE:
        assert theirs == []
        assert '101 vendor-specific event(s)' in result.stderr, result.stderr
    if capture == ANDROID_BY_BTSTACK:
        assert len(theirs) == 26 and sum(1 for r in theirs if r['ibeacon']) == 6


@pytest.mark.parametrize('capture', [p for p in ALL if p.read_bytes()[12:16] == b'\0\0\x03\xea'],
                         ids=lambda p: p.name.split('__')[0])
def test_every_android_capture_as_pklg_in_both_byte_orders(ibeacon_bin: Path, capture: Path, tmp_path: Path) -> None:
    """Each shared Android capture (thousands of legacy and extended reports) rewritten as
    PacketLogger, big-endian (macOS, BTstack) and little-endian (iOS): tshark and ibeacon read
    the same reports from it, and ibeacon reads the same as from the btsnoop original."""
    original, _ = scan_reports(ibeacon_bin, f'btsnoop:{capture}')
    for big in (True, False):
        path = tmp_path / f'{"be" if big else "le"}.pklg'
        path.write_bytes(btsnoop_to_pklg(capture.read_bytes(), big))
        ours, result = scan_reports(ibeacon_bin, f'pklg:{path}')
        assert result.returncode == 0, result.stderr
        compare(ours, tshark_reports(path))
        assert ours == original


# -- a phone's capture with a beacon 1 m away ----------------------------------------------------

BEACON = ('E2C56DB5-DFFB-48D2-B060-D0F5A71096E0', 258, 772)
BEACON_ADDRESS = bytes.fromhex('c0ffee123456')  # little-endian on the air: 56:34:12:EE:FF:C0


def ibeacon_report_event(rssi: int) -> bytes:
    """An LE Advertising Report event (0x3E/0x02) of the test beacon, non-connectable."""
    uuid_bytes = bytes.fromhex(BEACON[0].replace('-', ''))
    ad = bytes([2, 1, 6, 26, 0xFF, 0x4C, 0, 2, 21]) + uuid_bytes + struct.pack('>HHb', BEACON[1], BEACON[2], -59)
    params = bytes([0x02, 1, 0x03, 1]) + BEACON_ADDRESS + bytes([len(ad)]) + ad + struct.pack('b', rssi)
    return bytes([0x3E, len(params)]) + params


def phone_capture(tmp_path: Path, base: Path, big: bool, seconds: int = 40, seed: int = 7) -> Path:
    """A real phone's capture (its notes, its address, its vendor events…) followed by the test
    beacon heard about 9 times a second for `seconds` at a level that wanders a little."""
    data = base.read_bytes()
    if data[:8] == b'btsnoop\0':
        data = btsnoop_to_pklg(data, big)
    # The last record's time: the beacon follows a second later.
    at, last = 0, 0
    while at + 12 <= len(data):
        length, sec, usec = struct.unpack_from('>III' if big else '<III', data, at)
        last = max(last, sec * 1_000_000 + usec)
        at += 4 + length
    rng = random.Random(seed)
    t = last + 1_000_000
    out = bytearray(data)
    for _ in range(seconds * 9):
        t += int(rng.uniform(80_000, 140_000))
        out += pklg_record(0x01, ibeacon_report_event(round(rng.gauss(-61, 3))), t, big)
    path = tmp_path / f'phone-{base.stem[:12]}.pklg'
    path.write_bytes(bytes(out))
    return path


def apple_one_hz_mean(reports: list[dict], seconds: float) -> float:
    """Apple's calibration on tshark's RSSI column: the mean of the per-second means of the
    beacon's reports over the complete seconds read (time counted from its first report)."""
    ours = [r for r in reports if r['ibeacon'] and r['ibeacon'][:3] == BEACON]
    t0 = ours[0]['t']
    per_second: dict[int, list[int]] = {}
    for r in ours:
        if r['t'] - t0 < int(seconds):
            per_second.setdefault(int(r['t'] - t0), []).append(r['rssi'])
    means = [sum(v) / len(v) for v in per_second.values()]
    return sum(means) / len(means)


def addresses_in(capture: Path) -> set[str]:
    """Every Bluetooth address tshark finds anywhere in the capture (reports, commands, replies,
    the PacketLogger notes), with and without colons."""
    text = subprocess.run(['tshark', '-r', str(capture), '-V'], capture_output=True, text=True,
                                        timeout=120).stdout
    found = {m.upper() for m in re.findall(r'\b(?:[0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}\b', text)}
    return found | {a.replace(':', '') for a in found}


@pytest.mark.parametrize('base,big,kind', [
    (IPHONE, False, 'iphone-packetlogger'),
    (DATA / 'ap4y+iSAP__hci_dump.pklg', True, 'iphone-packetlogger'),
    (CAPTURES / 'cnrd+yeelock__btsnoop_hci.log', True, 'iphone-packetlogger'),
], ids=['iphone-le', 'btstack-be', 'android-as-pklg'])
def test_calibrate_from_a_phone_capture_writes_apple_1hz_mean(
        ibeacon_bin: Path, tmp_path: Path, base: Path, big: bool, kind: str) -> None:
    """`calibrate --profile P --device pklg:FILE` writes round(mean of the 1 Hz means), computed
    here from tshark's RSSI column over the seconds the calibration read; every other key of the
    profile is kept; the record says the receiver's kind and the span read (tshark's time of the
    first report, plus those seconds); and no address of the capture is in the profile — the
    phone's own (a Read BD_ADDR reply, the iPhone's "Address:" note) nor the beacon's."""
    capture = phone_capture(tmp_path, base, big)
    profile = tmp_path / 'spot.json'
    doc = {'name': 'door', 'uuid': BEACON[0], 'major': BEACON[1], 'minor': BEACON[2], 'measuredPower': -40,
           'intervalMs': 100, 'txPower': -4, 'x-store': {'aisle': 7}}
    profile.write_text(json.dumps(doc, indent=2) + '\n')
    # The Android log holds 15 minutes of other devices before the beacon: the calibration's
    # time starts at the beacon's first report, so the default --duration (180 s) reads it.
    result = run(ibeacon_bin, 'calibrate', '--profile', str(profile), '--device', f'pklg:{capture}', '--json',
                 timeout=60)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out['written'] is True
    theirs = tshark_reports(capture)
    expected = apple_one_hz_mean(theirs, out['seconds'])
    written = json.loads(profile.read_text())
    assert written['measuredPower'] == round(expected), (expected, out)
    assert abs(written['calibration']['estimate'] - expected) < 0.01, (expected, written['calibration'])
    assert {k: v for k, v in written.items() if k not in ('measuredPower', 'calibration')} == \
        {k: v for k, v in doc.items() if k != 'measuredPower'}
    record = written['calibration']
    assert record['capture']['kind'] == kind
    assert record['offset'] == 0 and record['receiverAddress'] == 'withheld'
    assert record['receiver'] == f'pklg:{capture.name}'
    # tshark: seconds since the file's first record
    first = next(r['t'] for r in theirs if r['ibeacon'] and r['ibeacon'][:3] == BEACON)
    epoch = float(subprocess.run(
        ['tshark', '-r', str(capture), '-c', '1', '-T', 'fields', '-e', 'frame.time_epoch'],
        capture_output=True, text=True).stdout)

    def iso(s: float) -> str:
        return datetime.fromtimestamp(round(s, 3), timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3] + 'Z'
    assert record['capture']['first'] == iso(epoch + first), record
    assert record['capture']['last'] == iso(epoch + first + out['seconds']), record
    text = profile.read_text().upper()
    addresses = addresses_in(capture)
    assert '56:34:12:EE:FF:C0' in addresses  # the beacon's, so the search below finds what is there
    leaked = sorted(a for a in addresses if a in text)
    assert not leaked, leaked


def test_calibrate_from_an_android_capture_withholds_the_phones_address(ibeacon_bin: Path, tmp_path: Path) -> None:
    """The same from Android's btsnoop log (the shared capture with its Read BD_ADDR reply, then
    the beacon): written, kind android-btsnoop, no address. Calibrating from a capture used to
    be --dry-run only."""
    pklg = phone_capture(tmp_path, CAPTURES / 'cnrd+yeelock__btsnoop_hci.log', big=True)
    # Back to btsnoop H4: the original's records, then the beacon's.
    original = (CAPTURES / 'cnrd+yeelock__btsnoop_hci.log').read_bytes()
    snoop = bytearray(original)
    data, at, skip = pklg.read_bytes(), 0, len(btsnoop_to_pklg(original, True))
    at = skip
    while at < len(data):
        length, sec, usec = struct.unpack_from('>III', data, at)
        body = data[at + 13:at + 4 + length]
        packet = b'\x04' + body
        snoop += struct.pack('>IIIIq', len(packet), len(packet), 3, 0, sec * 1_000_000 + usec + EPOCH_DELTA_US) + packet
        at += 4 + length
    capture = tmp_path / 'btsnoop_hci.log'
    capture.write_bytes(bytes(snoop))
    profile = tmp_path / 'spot.json'
    profile.write_text(json.dumps({'uuid': BEACON[0], 'major': BEACON[1], 'minor': BEACON[2],
                                   'measuredPower': -40}) + '\n')
    result = run(ibeacon_bin, 'calibrate', '--profile', str(profile), '--device', f'btsnoop:{capture}', '--json',
                 timeout=60)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    written = json.loads(profile.read_text())
    assert written['measuredPower'] == round(apple_one_hz_mean(tshark_reports(capture), out['seconds']))
    assert written['calibration']['capture']['kind'] == 'android-btsnoop'
    phone = subprocess.run(
        ['tshark', '-r', str(capture), '-Y', 'bthci_evt.opcode == 0x1009',
         '-T', 'fields', '-e', 'bthci_evt.bd_addr'], capture_output=True, text=True).stdout.split()
    assert phone, 'the capture holds the phone address (Read BD_ADDR reply)'
    text = profile.read_text().upper()
    leaked = sorted(a for a in addresses_in(capture) if a in text)
    assert not leaked and phone[0].upper() not in text, leaked


# -- cut and hostile files -----------------------------------------------------------------------

def record_ends(data: bytes, big: bool) -> list[int]:
    ends, at = [], 0
    while at + 4 <= len(data):
        at += 4 + struct.unpack_from('>I' if big else '<I', data, at)[0]
        ends.append(at)
    return ends


@pytest.mark.parametrize('capture,big', [(ANDROID_BY_BTSTACK, True), (IPHONE, False)], ids=['be', 'le'])
def test_a_cut_pklg_reads_every_complete_record_then_exits_79(
        ibeacon_bin: Path, tmp_path: Path, capture: Path, big: bool) -> None:
    """Cut at record boundaries, inside headers and inside packets: at a boundary exit 0, else the
    reports before the cut, a message naming the byte offset of the cut record, exit 79."""
    data = capture.read_bytes()
    ends = record_ends(data, big)
    assert ends[-1] == len(data)
    full, _ = scan_reports(ibeacon_bin, f'pklg:{capture}')
    rng = random.Random(5)
    cuts = sorted({1, 4, 11, 12, 13} | {e + d for e in ends[:6] + ends[-3:] for d in (0, 1, 5, 12)}
                  | {rng.randrange(1, len(data)) for _ in range(12)})
    path = tmp_path / 'cut.pklg'
    for cut in (c for c in cuts if c < len(data)):
        path.write_bytes(data[:cut])
        ours, result = scan_reports(ibeacon_bin, f'pklg:{path}')
        if cut in ends:
            assert result.returncode == 0, (cut, result.stderr)
        else:
            start = max([0] + [e for e in ends if e < cut])
            assert result.returncode == DAMAGED, (cut, result.returncode, result.stderr)
            assert 'truncated' in result.stderr and f'byte offset {start}' in result.stderr, (cut, result.stderr)
        assert ours == full[:len(ours)], cut


def test_hostile_pklg_files(ibeacon_bin: Path, tmp_path: Path) -> None:
    """A record claiming 4 GiB or less than its own time stamp, a file of 200,000 notes, junk, and a
    file that is not a capture at all: each read quickly to where it breaks, with a message naming
    the file and the byte offset; nothing is allocated for a length the file does not hold."""
    event = ibeacon_report_event(-60)
    good = pklg_record(0x01, event, 1_700_000_000_000_000, True)
    cases = {
        'huge': (good + struct.pack('>III', 0xFFFFFFF0, 1, 2) + b'\x01' * 64, DAMAGED, 'more than the largest'),
        'short': (good + struct.pack('>III', 7, 1, 2), DAMAGED, 'less than the 8 bytes'),
        'junk': (b'\x7fELF' + bytes(200), 65, 'nor a PacketLogger'),
    }
    for name, (data, code, words) in cases.items():
        path = tmp_path / f'{name}.pklg'
        path.write_bytes(data)
        ours, result = scan_reports(ibeacon_bin, f'pklg:{path}')
        assert result.returncode == code, (name, result.stderr)
        assert words in result.stderr and str(path) in result.stderr, (name, result.stderr)
        if code == DAMAGED:
            assert len(ours) == 1 and 'byte offset %d' % len(good) in result.stderr, (name, result.stderr)
    notes = tmp_path / 'notes.pklg'
    notes.write_bytes(b''.join(pklg_record(0xFC, b'x', 1_700_000_000_000_000 + k, False) for k in range(200_000))
                      + pklg_record(0x01, event, 1_700_000_001_000_000, False))
    ours, result = scan_reports(ibeacon_bin, f'pklg:{notes}')
    assert result.returncode == 0 and len(ours) == 1, result.stderr


def test_calibrating_from_an_iphone_trace_without_reports_says_why(ibeacon_bin: Path, tmp_path: Path) -> None:
    """The real iPhone trace holds what its controller heard only in vendor events: calibrate says
    the beacon is not in the capture and why that may be (exit 68), and the profile is unchanged."""
    profile = tmp_path / 'spot.json'
    profile.write_text(json.dumps({'uuid': BEACON[0], 'major': BEACON[1], 'minor': BEACON[2],
                                   'measuredPower': -40}) + '\n')
    before = profile.read_bytes()
    result = run(ibeacon_bin, 'calibrate', '--profile', str(profile), '--device', f'pklg:{IPHONE}', timeout=60)
    assert result.returncode == 68, result.stderr
    assert f'is not in pklg:{IPHONE}' in result.stderr and 'within range' not in result.stderr, result.stderr
    assert 'vendor-specific event(s)' in result.stderr, result.stderr
    assert profile.read_bytes() == before
