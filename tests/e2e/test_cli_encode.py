"""End-to-end: `ibeacon encode` checked by independent decoders (Bumble's AD parser and
HCI command parser), `ibeacon decode` round trips, and malformed input to `ibeacon decode`.

No controller is involved. Vectors use lopsided values (major 0x0102, minor 0x0304) so a
byte-order mistake cannot cancel out.
"""

from __future__ import annotations

import json
import struct
import uuid as uuidlib
from pathlib import Path

import pytest

from support import BEACON_UUID, MAJOR, MINOR, POWER, write_profile, run
from bumble import hci
from bumble.core import AdvertisingData

REPO_ROOT = Path(__file__).resolve().parents[2]
STORE12 = REPO_ROOT / 'profiles' / 'store12.json'

APPLE = 0x004C

EX_DATAERR = 65


def encode_json(ibeacon_bin: Path, *args: str) -> dict:
    result = run(ibeacon_bin, 'encode', *args, '--json')
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def ibeacon_from_ad(data: bytes) -> dict:
    """The iBeacon fields, decoded by Bumble (not by ibeacon)."""
    ad = AdvertisingData.from_bytes(data)
    # Flags: LE General Discoverable (bit 1) + BR/EDR Not Supported (bit 2), CSS Part A 1.3.
    assert ad.get(AdvertisingData.FLAGS) == 0x06
    beacons = [
        (company, bytes(payload))
        for company, payload in ad.get_all(AdvertisingData.MANUFACTURER_SPECIFIC_DATA)
        if company == APPLE
    ]
    assert len(beacons) == 1, ad.ad_structures
    payload = beacons[0][1]
    assert payload[:2] == b'\x02\x15' and len(payload) == 23  # type 0x02, 21 octets follow
    major, minor, power = struct.unpack('>HHb', payload[18:23])
    return {'uuid': str(uuidlib.UUID(bytes=payload[2:18])).upper(), 'major': major, 'minor': minor, 'power': power}


def parse_h4_commands(commands: list[dict]) -> list[hci.HCI_Command]:
    """Checks the H4 framing by hand (Vol 4 Part A 2; Vol 4 Part E 5.4.1), then lets Bumble
    decode each command."""
    parsed = []
    for command in commands:
        raw = bytes.fromhex(command['h4'])
        assert raw[0] == 0x01, command  # H4 packet type: HCI Command
        opcode = raw[1] | raw[2] << 8
        assert opcode == int(command['opcode'], 16), command
        assert raw[3] == len(raw) - 4, f'parameter length {raw[3]} but {len(raw) - 4} octets follow'
        packet = hci.HCI_Packet.from_bytes(raw)
        assert isinstance(packet, hci.HCI_Command) and packet.op_code == opcode
        parsed.append(packet)
    return parsed


# -----------------------------------------------------------------------------
# encode
# -----------------------------------------------------------------------------
def test_encode_profile_decoded_by_bumble(ibeacon_bin, tmp_path):
    profile = write_profile(tmp_path / 'beacon.json')
    out = encode_json(ibeacon_bin, '--profile', str(profile))
    data = bytes.fromhex(out['advertisingData'])
    assert len(data) == 30
    assert ibeacon_from_ad(data) == {'uuid': BEACON_UUID, 'major': MAJOR, 'minor': MINOR, 'power': POWER}
    assert (out['uuid'].upper(), out['major'], out['minor'], out['measuredPower']) == (
        BEACON_UUID, MAJOR, MINOR, POWER)


def test_encode_legacy_commands_are_valid_h4(ibeacon_bin, tmp_path):
    profile = write_profile(tmp_path / 'beacon.json', intervalMs=250)
    out = encode_json(ibeacon_bin, '--profile', str(profile), '--mode', 'legacy')
    data = bytes.fromhex(out['advertisingData'])
    commands = parse_h4_commands(out['commands'])
    kinds = [type(c).__name__ for c in commands]
    # Ends with LE Set Advertising Enable (1); parameters and data come before it.
    last = commands[-1]
    assert isinstance(last, hci.HCI_LE_Set_Advertising_Enable_Command) and last.advertising_enable == 1, kinds
    params = [c for c in commands if isinstance(c, hci.HCI_LE_Set_Advertising_Parameters_Command)]
    assert len(params) == 1, kinds
    # 250 ms = 400 slots of 0.625 ms (Vol 4 Part E 7.8.5); ADV_NONCONN_IND = 0x03; public.
    assert params[0].advertising_interval_min == 400 and params[0].advertising_interval_max == 400
    assert params[0].advertising_type == 0x03
    assert params[0].own_address_type == 0x00
    assert params[0].advertising_channel_map == 0x07
    adv_data = [c for c in commands if isinstance(c, hci.HCI_LE_Set_Advertising_Data_Command)]
    assert len(adv_data) == 1, kinds
    raw = bytes.fromhex(out['commands'][commands.index(adv_data[0])]['h4'])
    assert raw[3] == 32  # Advertising_Data_Length + 31 octets, always (7.8.7)
    assert raw[4] == 30 and raw[5:35] == data and raw[35:] == b'\x00'
    # Nothing enables advertising before the data is set.
    enables = [i for i, c in enumerate(commands)
               if isinstance(c, hci.HCI_LE_Set_Advertising_Enable_Command) and c.advertising_enable]
    assert enables == [len(commands) - 1]


def test_encode_extended_commands_are_valid_h4(ibeacon_bin, tmp_path):
    profile = write_profile(tmp_path / 'beacon.json')
    out = encode_json(ibeacon_bin, '--profile', str(profile), '--mode', 'extended')
    data = bytes.fromhex(out['advertisingData'])
    commands = parse_h4_commands(out['commands'])
    kinds = [type(c).__name__ for c in commands]
    params = [c for c in commands if isinstance(c, hci.HCI_LE_Set_Extended_Advertising_Parameters_Command)]
    assert len(params) == 1, kinds
    # Use_Legacy_PDUs (bit 4) only: ADV_NONCONN_IND (Vol 4 Part E 7.8.53, table of legacy PDUs).
    assert int(params[0].advertising_event_properties) == 0x10
    assert params[0].primary_advertising_interval_min == 160  # 100 ms
    ext_data = [c for c in commands if isinstance(c, hci.HCI_LE_Set_Extended_Advertising_Data_Command)]
    assert len(ext_data) == 1 and bytes(ext_data[0].advertising_data) == data
    assert ext_data[0].operation == 0x03  # complete data
    last = commands[-1]
    assert isinstance(last, hci.HCI_LE_Set_Extended_Advertising_Enable_Command) and last.enable == 1, kinds


def test_encode_from_command_line_fields_matches_profile(ibeacon_bin, tmp_path):
    profile = write_profile(tmp_path / 'beacon.json')
    from_profile = encode_json(ibeacon_bin, '--profile', str(profile))
    from_fields = encode_json(
        ibeacon_bin, '--uuid', BEACON_UUID, '--major', str(MAJOR), '--minor', str(MINOR),
        f'--measured-power={POWER}')
    assert from_fields['advertisingData'] == from_profile['advertisingData']


def test_encode_negative_measured_power_as_separate_argument(ibeacon_bin):
    # `--measured-power -65` is how the help text invites users to write it (-127…-1 dBm).
    result = run(ibeacon_bin, 'encode', '--uuid', BEACON_UUID, '--major', str(MAJOR), '--minor', str(MINOR),
                 '--measured-power', '-65', '--json')
    assert result.returncode == 0, result.stderr
    assert ibeacon_from_ad(bytes.fromhex(json.loads(result.stdout)['advertisingData']))['power'] == -65


def test_encode_store12_profile(ibeacon_bin):
    assert STORE12.exists(), f'{STORE12} is missing (it lands with the profile model)'
    doc = json.loads(STORE12.read_text())
    out = encode_json(ibeacon_bin, '--profile', str(STORE12))
    assert ibeacon_from_ad(bytes.fromhex(out['advertisingData'])) == {
        'uuid': doc['uuid'].upper(), 'major': doc['major'], 'minor': doc['minor'], 'power': doc['measuredPower'],
    }


# -----------------------------------------------------------------------------
# decode: round trips
# -----------------------------------------------------------------------------
def test_decode_round_trips_encode(ibeacon_bin, tmp_path):
    profile = write_profile(tmp_path / 'beacon.json')
    data_hex = encode_json(ibeacon_bin, '--profile', str(profile))['advertisingData']
    result = run(ibeacon_bin, 'decode', data_hex, '--json')
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out['ibeacon']['uuid'].upper() == BEACON_UUID
    assert (out['ibeacon']['major'], out['ibeacon']['minor'], out['ibeacon']['measuredPower']) == (
        MAJOR, MINOR, POWER)
    assert [s['type'] for s in out['structures']] == [0x01, 0xFF]


# A legacy LE Advertising Report event built by hand from Vol 4 Part E 7.7.65.2.
REPORT_ADDRESS = 'C4:11:22:33:44:55'


def ibeacon_ad() -> bytes:
    return (
        bytes([0x02, 0x01, 0x06])  # Flags: LE General Discoverable, BR/EDR not supported
        + bytes([0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15])  # 26 octets: Apple, iBeacon, 21 follow
        + uuidlib.UUID(BEACON_UUID).bytes  # proximity UUID, as written
        + struct.pack('>HHb', MAJOR, MINOR, POWER)  # major, minor big-endian; power signed
    )


def report(data: bytes, event_type: int = 0x03, rssi: int = -59, data_length: int | None = None) -> bytes:
    return (
        bytes([event_type])  # Event_Type: ADV_NONCONN_IND
        + bytes([0x01])  # Address_Type: random
        + bytes(reversed(bytes.fromhex(REPORT_ADDRESS.replace(':', ''))))  # Address, little endian
        + bytes([len(data) if data_length is None else data_length])  # Data_Length
        + data
        + struct.pack('b', rssi)  # RSSI, int8
    )


def le_meta_event(parameters: bytes, length: int | None = None, h4: bool = True) -> bytes:
    """H4 04, event code 0x3E (LE Meta), Parameter_Total_Length, parameters."""
    body = bytes([0x3E, len(parameters) if length is None else length]) + parameters
    return (b'\x04' if h4 else b'') + body


def advertising_report_event(*reports: bytes, length: int | None = None, h4: bool = True) -> bytes:
    return le_meta_event(bytes([0x02, len(reports)]) + b''.join(reports), length, h4)  # subevent 0x02


def test_decode_advertising_report_event(ibeacon_bin):
    event = advertising_report_event(report(ibeacon_ad(), rssi=-67))
    result = run(ibeacon_bin, 'decode', event.hex(' '), '--json')
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert len(out['reports']) == 1
    r = out['reports'][0]
    assert r['address'].upper() == REPORT_ADDRESS
    assert r['rssi'] == -67
    assert r['ibeacon']['uuid'].upper() == BEACON_UUID
    assert (r['ibeacon']['major'], r['ibeacon']['minor'], r['ibeacon']['measuredPower']) == (MAJOR, MINOR, POWER)


def test_decode_two_report_event(ibeacon_bin):
    other = ibeacon_ad()[:-5] + struct.pack('>HHb', 0x0506, 0x0708, -65)
    event = advertising_report_event(report(ibeacon_ad()), report(other, rssi=-80))
    result = run(ibeacon_bin, 'decode', event.hex(), '--json')
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)['reports']
    assert [(r['ibeacon']['major'], r['ibeacon']['minor'], r['rssi']) for r in reports] == [
        (MAJOR, MINOR, -59), (0x0506, 0x0708, -80)]


def test_decode_report_with_malformed_ad_is_still_a_report(ibeacon_bin):
    """A length running past the data is common in the wild (FIELD.md): like scan, decode shows the
    report (address, RSSI, raw data) with the problem, and no iBeacon; it does not reject it."""
    event = advertising_report_event(report(bytes.fromhex('05ff4c00'), rssi=-70), report(ibeacon_ad(), rssi=-61))
    result = run(ibeacon_bin, 'decode', event.hex(), '--json')
    assert result.returncode == 0, result.stderr
    first, second = json.loads(result.stdout)['reports']
    assert (first['address'].upper(), first['rssi'], first['data']) == (REPORT_ADDRESS, -70, '05ff4c00')
    assert first['ibeacon'] is None and first['structures'] == []
    assert 'malformed' in first['adError'] and 'offset 0' in first['adError']
    assert second['ibeacon']['major'] == MAJOR and 'adError' not in second
    text = run(ibeacon_bin, 'decode', event.hex())
    assert text.returncode == 0, text.stderr
    assert 'malformed advertising data' in text.stdout and 'data: 05ff4c00' in text.stdout


def test_decode_json_empty_list_is_an_array(ibeacon_bin):
    """Advertising data of only a terminator has no AD structures: `"structures":[]`, not `{}`."""
    result = run(ibeacon_bin, 'decode', '--as', 'ad', '00', '--json')
    assert result.returncode == 0, result.stderr
    assert '"structures":[]' in result.stdout
    assert json.loads(result.stdout)['structures'] == []
    event = advertising_report_event(report(b''))
    result = run(ibeacon_bin, 'decode', event.hex(), '--json')
    assert json.loads(result.stdout)['reports'][0]['structures'] == []


# -----------------------------------------------------------------------------
# decode: malformed input
# -----------------------------------------------------------------------------
FULL_EVENT = advertising_report_event(report(ibeacon_ad()))  # 04 3E 2A 02 01 ...
# Cut points inside the event parameters (offsets counted from the subevent code).
CUTS = {
    'after-subevent': 1,
    'after-num-reports': 2,
    'after-event-type': 3,
    'mid-address': 7,
    'after-address': 10,
    'after-data-length': 11,
    'mid-data': 26,
    'before-rssi': 41,
}


def truncated(cut: int, fix_length: bool) -> bytes:
    parameters = FULL_EVENT[3:3 + cut]
    return le_meta_event(parameters, None if fix_length else len(FULL_EVENT) - 3)


MALFORMED: dict[str, str] = {
    'not-hex': 'zz',
    'not-hex-unicode': 'ßß',
    'odd-digits': '02010',
    'odd-digit-alone': 'a',
    'split-byte': '0 2 01 06',
    'empty': '',
    'prefix-only': '0x',
    'ad-length-past-end': '030106',
    'ad-manufacturer-past-end': '0201061aff4c000215',
    'ad-32-bytes': (ibeacon_ad() + bytes([0x01, 0x0A])).hex(),  # 32 octets: > 31 (Vol 4 Part E 7.8.7)
    'ad-junk-after-terminator': '020106' + '00' + 'ff',
    'report-data-length-32': advertising_report_event(report(ibeacon_ad() + b'\x01\x0a')).hex(),
    'multi-report-bad-second': advertising_report_event(
        report(ibeacon_ad()), report(ibeacon_ad()[:5], data_length=31)[:-1]).hex(),
    'event-code-only': '3e',
    'h4-header-only': '043e',
    'event-code-first-truncated': truncated(10, fix_length=False)[1:].hex(),
}
for _name, _cut in CUTS.items():
    MALFORMED[f'truncated-{_name}'] = truncated(_cut, fix_length=False).hex()
    MALFORMED[f'truncated-{_name}-consistent-length'] = truncated(_cut, fix_length=True).hex()


def test_malformed_table_is_big_enough():
    assert len(MALFORMED) >= 15


@pytest.mark.parametrize('name', list(MALFORMED))
def test_decode_rejects_malformed_input(ibeacon_bin, name):
    result = run(ibeacon_bin, 'decode', MALFORMED[name], '--json')
    assert result.returncode == EX_DATAERR, (name, result.returncode, result.stdout, result.stderr)
    assert result.stderr.strip(), 'no message'
    assert 'decode' in result.stderr
    for crash in ('Traceback', 'Fatal error', 'internal error', 'Stack dump'):
        assert crash not in result.stderr, result.stderr
    assert result.stdout == '', 'nothing may be printed for input that is rejected'
