"""Self-tests of the emulated Bluetooth world (tests/harness/bumble_harness.py).

The DUT is driven by a raw H4 client written here (socket or pty + HCI bytes
assembled by hand from the Core spec, Vol 4 Part E), so the harness is checked
independently of both `ibeacon` and Bumble's host stack.
"""

from __future__ import annotations

import os
import select
import socket
import statistics
import struct
import termios
import time
import tty
import uuid

import pytest

# iBeacon test vector (lopsided values; Apple iBeacon layout).
BEACON_UUID = uuid.UUID('E2C56DB5-DFFB-48D2-B060-D0F5A71096E0')
MAJOR = 0x0102
MINOR = 0x0304
POWER = -59


def ibeacon_ad(major: int = MAJOR, minor: int = MINOR, power: int = POWER) -> bytes:
    return bytes(
        [0x02, 0x01, 0x06]  # AD Flags: LE General Discoverable, BR/EDR not supported
        + [0x1A, 0xFF]  # 26 octets of Manufacturer Specific Data
        + [0x4C, 0x00]  # company 0x004C (Apple), little endian
        + [0x02, 0x15]  # iBeacon type, 21 octets follow
    ) + BEACON_UUID.bytes + struct.pack('>HHb', major, minor, power)


# Opcodes (Vol 4 Part E 7.3 / 7.4 / 7.8).
SET_EVENT_MASK = 0x0C01
RESET = 0x0C03
READ_BD_ADDR = 0x1009
READ_LOCAL_SUPPORTED_COMMANDS = 0x1002
LE_SET_EVENT_MASK = 0x2001
LE_READ_LOCAL_SUPPORTED_FEATURES = 0x2003
LE_SET_ADVERTISING_PARAMETERS = 0x2006
LE_SET_ADVERTISING_DATA = 0x2008
LE_SET_ADVERTISING_ENABLE = 0x200A
LE_SET_SCAN_PARAMETERS = 0x200B
LE_SET_SCAN_ENABLE = 0x200C
LE_SET_ADVERTISING_SET_RANDOM_ADDRESS = 0x2035
LE_SET_EXTENDED_ADVERTISING_PARAMETERS = 0x2036
LE_SET_EXTENDED_ADVERTISING_DATA = 0x2037
LE_SET_EXTENDED_ADVERTISING_ENABLE = 0x2039
LE_SET_EXTENDED_SCAN_PARAMETERS = 0x2041
LE_SET_EXTENDED_SCAN_ENABLE = 0x2042

ALL_EVENTS_MASK = 0x3FFFFFFFFFFFFFFF  # bits 0..61 incl. LE Meta (bit 61)
ADV_NONCONN_IND = 0x03


def bdaddr(text: str) -> bytes:
    """BD_ADDR as sent over HCI (little endian)."""
    return bytes(reversed(bytes.fromhex(text.replace(':', ''))))


class H4Client:
    """Minimal H4 host: commands out, events in."""

    def __init__(self, device_spec: str) -> None:
        kind, _, where = device_spec.partition(':')
        self.sock: socket.socket | None = None
        self.fd = -1
        if kind == 'tcp':
            host, _, port = where.rpartition(':')
            self.sock = socket.create_connection((host, int(port)), timeout=5)
            self.sock.setblocking(False)
        else:
            self.fd = os.open(where, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
            tty.setraw(self.fd)
            termios.tcflush(self.fd, termios.TCIOFLUSH)
        self.buffer = bytearray()
        self.backlog: list[bytes] = []

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def write(self, data: bytes) -> None:
        if self.sock is not None:
            self.sock.sendall(data)
        else:
            os.write(self.fd, data)

    def send_command(self, opcode: int, params: bytes = b'') -> None:
        self.write(struct.pack('<BHB', 0x01, opcode, len(params)) + params)

    def _fill(self, timeout: float) -> bool:
        handle = self.sock if self.sock is not None else self.fd
        ready, _, _ = select.select([handle], [], [], max(timeout, 0))
        if not ready:
            return False
        try:
            data = self.sock.recv(4096) if self.sock is not None else os.read(self.fd, 4096)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            data = b''
        if not data:
            raise ConnectionError('H4 connection closed')
        self.buffer.extend(data)
        return True

    def read_packet(self, timeout: float) -> bytes | None:
        """Next H4 event packet (with its 0x04 indicator), or None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buffer) >= 3:
                assert self.buffer[0] == 0x04, f'unexpected H4 type {self.buffer[:8].hex()}'
                size = 3 + self.buffer[2]
                if len(self.buffer) >= size:
                    packet = bytes(self.buffer[:size])
                    del self.buffer[:size]
                    return packet
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._fill(remaining)

    def packets(self, duration: float) -> list[bytes]:
        """Every event received during `duration` seconds (plus the backlog)."""
        result, self.backlog = self.backlog, []
        deadline = time.monotonic() + duration
        while (remaining := deadline - time.monotonic()) > 0:
            packet = self.read_packet(remaining)
            if packet is not None:
                result.append(packet)
        return result

    def command(self, opcode: int, params: bytes = b'', timeout: float = 3.0) -> bytes:
        """Send a command, return the Command Complete return parameters
        (status first); other events go to the backlog."""
        self.send_command(opcode, params)
        deadline = time.monotonic() + timeout
        while True:
            packet = self.read_packet(deadline - time.monotonic())
            if packet is None:
                raise TimeoutError(f'no Command Complete for 0x{opcode:04X}')
            # Command Complete: 04 0E len ncmd opcode(2) return-params
            if packet[1] == 0x0E and struct.unpack_from('<H', packet, 4)[0] == opcode:
                return packet[6:]
            # Command Status: 04 0F len status ncmd opcode(2)
            if packet[1] == 0x0F and struct.unpack_from('<H', packet, 5)[0] == opcode:
                return packet[3:4]
            self.backlog.append(packet)

    def ok(self, opcode: int, params: bytes = b'') -> bytes:
        result = self.command(opcode, params)
        assert result[0] == 0x00, f'0x{opcode:04X} failed with status 0x{result[0]:02X}'
        return result

    # -- helpers built from the spec's parameter layouts -------------------
    def init(self, event_mask: int = ALL_EVENTS_MASK, le_event_mask: int = 0x1FFF) -> None:
        self.ok(RESET)
        self.ok(SET_EVENT_MASK, event_mask.to_bytes(8, 'little'))
        self.ok(LE_SET_EVENT_MASK, le_event_mask.to_bytes(8, 'little'))

    def start_legacy_advertising(self, interval_ms: float, data: bytes, adv_type: int = ADV_NONCONN_IND) -> None:
        units = round(interval_ms / 0.625)
        params = struct.pack('<HHBBB', units, units, adv_type, 0x00, 0x00)  # own addr public
        params += bytes(6) + bytes([0x07, 0x00])  # peer addr, all channels, no filter
        self.ok(LE_SET_ADVERTISING_PARAMETERS, params)
        self.ok(LE_SET_ADVERTISING_DATA, bytes([len(data)]) + data.ljust(31, b'\x00'))
        self.ok(LE_SET_ADVERTISING_ENABLE, b'\x01')

    def start_legacy_scan(self, filter_duplicates: int = 0) -> None:
        # passive, interval = window = 0x0010 (10 ms), own public, accept all
        self.ok(LE_SET_SCAN_PARAMETERS, struct.pack('<BHHBB', 0x00, 0x10, 0x10, 0x00, 0x00))
        self.ok(LE_SET_SCAN_ENABLE, bytes([0x01, filter_duplicates]))


def le_meta(packets: list[bytes], subevent: int) -> list[bytes]:
    return [p for p in packets if p[1] == 0x3E and p[3] == subevent]


def parse_legacy_report(packet: bytes) -> dict:
    """LE Advertising Report (7.7.65.2) with one report."""
    assert packet[3] == 0x02 and packet[4] == 1
    event_type, address_type = packet[5], packet[6]
    address = ':'.join(f'{b:02X}' for b in reversed(packet[7:13]))
    length = packet[13]
    data = packet[14 : 14 + length]
    rssi = struct.unpack_from('b', packet, 14 + length)[0]
    return dict(event_type=event_type, address_type=address_type, address=address, data=data, rssi=rssi)


def parse_extended_report(packet: bytes) -> dict:
    """LE Extended Advertising Report (7.7.65.13) with one report."""
    assert packet[3] == 0x0D and packet[4] == 1
    (event_type,) = struct.unpack_from('<H', packet, 5)
    address = ':'.join(f'{b:02X}' for b in reversed(packet[8:14]))
    rssi = struct.unpack_from('b', packet, 18)[0]
    # 14 primary PHY, 15 secondary PHY, 16 SID, 17 TX power, 18 RSSI,
    # 19-20 periodic interval, 21 direct address type, 22-27 direct address, 28 length
    length = packet[28]
    return dict(event_type=event_type, address=address, rssi=rssi, data=packet[29 : 29 + length])


@pytest.fixture
def client_factory():
    clients: list[H4Client] = []

    def connect(device_spec: str) -> H4Client:
        client = H4Client(device_spec)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


# -----------------------------------------------------------------------------
def test_ready_and_address(harness_factory, client_factory):
    h = harness_factory()
    assert h.device_spec.startswith('tcp:127.0.0.1:')
    c = client_factory(h.device_spec)
    c.init()
    result = c.ok(READ_BD_ADDR)
    assert result[1:7] == bdaddr('F0:F1:F2:F3:F4:F5')


def test_control_reset_powercycle_hwerror(harness_factory, client_factory):
    h = harness_factory()
    c = client_factory(h.device_spec)
    c.init()
    h.wait_for(lambda e: e['event'] == 'client' and e['state'] == 'connected')
    h.send('reset')
    assert c.read_packet(2.0) == bytes.fromhex('040e0401030c00')  # CC Reset, status 0
    h.send('powercycle')
    assert c.read_packet(2.0) == bytes.fromhex('040e03010000')  # CC NOP, ncmd 1
    h.send('hwerror')
    assert c.read_packet(2.0) == bytes.fromhex('04100101')  # Hardware Error code 1


def test_unknown_opcodes_get_command_complete_0x01(harness_factory, client_factory):
    h = harness_factory()
    c = client_factory(h.device_spec)
    c.init()
    for opcode in (0xFC55, 0x0C7E, 0x2099):  # vendor, unassigned HC&BB, unassigned LE
        assert c.command(opcode, b'\x01\x02')[0] == 0x01
    # and the controller still works afterwards
    assert c.ok(READ_BD_ADDR)[1:7] == bdaddr(h.address)


def test_invalid_advertising_parameters_rejected(harness_factory, client_factory):
    h = harness_factory()
    c = client_factory(h.device_spec)
    c.init()
    bad_interval = struct.pack('<HHBBB', 0x0010, 0x0010, ADV_NONCONN_IND, 0, 0) + bytes(6) + b'\x07\x00'
    assert c.command(LE_SET_ADVERTISING_PARAMETERS, bad_interval)[0] == 0x12
    min_above_max = struct.pack('<HHBBB', 0x0200, 0x0100, ADV_NONCONN_IND, 0, 0) + bytes(6) + b'\x07\x00'
    assert c.command(LE_SET_ADVERTISING_PARAMETERS, min_above_max)[0] == 0x12


def test_legacy_nonconn_advertising_rate_and_decoding(harness_factory, client_factory):
    h = harness_factory('--scanner')
    c = client_factory(h.device_spec)
    c.init()
    c.start_legacy_advertising(100, ibeacon_ad())
    time.sleep(0.3)
    t0 = time.monotonic()
    time.sleep(2.0)
    heard = [e for e in h.adv_events(since=t0, address=h.address) if e['t'] < t0 + 2.0]
    per_second = len(heard) / 2.0
    assert 7 <= per_second <= 13, f'{per_second} PDUs/s at 100 ms'
    for event in heard:
        assert event['type'] == 'nonconn' and event['legacy'] is True
        assert event['address_type'] == 'public'
        assert event['ibeacon'] == {
            'uuid': str(BEACON_UUID).upper(), 'major': MAJOR, 'minor': MINOR, 'power': POWER,
        }
        assert event['data'] == ibeacon_ad().hex()

    c.ok(LE_SET_ADVERTISING_ENABLE, b'\x00')
    time.sleep(0.2)
    t_stop = time.monotonic()
    time.sleep(0.4)
    assert h.adv_events(since=t_stop, address=h.address) == [], 'advertising did not stop'

    # 1000 ms (1600 units): PDUs at ~0, ~1.0, ~2.0 s after enable -> 3 in 2.5 s
    # (N ms instead of N x 0.625 ms would give 2).
    t1 = time.monotonic()
    c.start_legacy_advertising(1000, ibeacon_ad())
    time.sleep(2.5 - (time.monotonic() - t1))
    slow = [e for e in h.adv_events(since=t1, address=h.address) if e['t'] < t1 + 2.5]
    # Tolerant on a loaded machine: 2-4 PDUs, and the spacing tells 1.0 s from 1.6 s.
    assert 2 <= len(slow) <= 4, f'{len(slow)} PDUs in 2.5 s at 1000 ms'
    gaps = [b['t'] - a['t'] for a, b in zip(slow, slow[1:])]
    assert 0.85 <= statistics.median(gaps) <= 1.25, gaps


def test_reset_stops_advertising(harness_factory, client_factory):
    h = harness_factory('--scanner')
    c = client_factory(h.device_spec)
    c.init()
    c.start_legacy_advertising(50, ibeacon_ad())
    h.wait_for(lambda e: e['event'] == 'adv' and e['address'] == h.address, timeout=3)
    c.ok(RESET)
    time.sleep(0.1)
    t0 = time.monotonic()
    time.sleep(0.5)
    assert h.adv_events(since=t0, address=h.address) == []
    # Data and parameters are gone too: enabling again (defaults: 1.28 s ADV_IND, no data)
    # must not bring back the iBeacon.
    c.ok(SET_EVENT_MASK, ALL_EVENTS_MASK.to_bytes(8, 'little'))
    t_enable = time.monotonic()
    c.ok(LE_SET_ADVERTISING_ENABLE, b'\x01')
    event = h.wait_for(
        lambda e: e['event'] == 'adv' and e['address'] == h.address and e['t'] >= t_enable, timeout=3
    )
    assert event['ibeacon'] is None and event['data'] == '' and event['type'] == 'ind'
    # control 'reset' (another host resetting the adapter) stops it as well
    h.send('reset')
    assert c.read_packet(2.0) == bytes.fromhex('040e0401030c00')
    time.sleep(0.1)
    t1 = time.monotonic()
    time.sleep(1.5)
    assert h.adv_events(since=t1, address=h.address) == []


def test_event_mask_respected(harness_factory, client_factory):
    beacon = f'{BEACON_UUID},{MAJOR},{MINOR},{POWER},20'
    h = harness_factory('--beacon', beacon)
    c = client_factory(h.device_spec)
    # Event mask without bit 61 (LE Meta): no LE Meta events at all.
    c.init(event_mask=ALL_EVENTS_MASK & ~(1 << 61))
    c.start_legacy_scan()
    assert [p for p in c.packets(0.5) if p[1] == 0x3E] == []
    c.ok(LE_SET_SCAN_ENABLE, b'\x00\x00')
    # Bit 61 set but LE mask without bit 1 (advertising report): still nothing.
    c.ok(SET_EVENT_MASK, ALL_EVENTS_MASK.to_bytes(8, 'little'))
    c.ok(LE_SET_EVENT_MASK, (0x1FFF & ~(1 << 1)).to_bytes(8, 'little'))
    c.ok(LE_SET_SCAN_ENABLE, b'\x01\x00')
    assert [p for p in c.packets(0.5) if p[1] == 0x3E] == []
    c.ok(LE_SET_SCAN_ENABLE, b'\x00\x00')
    # Both bits: reports arrive.
    c.ok(LE_SET_EVENT_MASK, (1 << 1).to_bytes(8, 'little'))
    c.ok(LE_SET_SCAN_ENABLE, b'\x01\x00')
    assert len(le_meta(c.packets(0.5), 0x02)) >= 5
    # Reset restores the default masks (no bit 61): silence again. Reports the controller sent
    # before its Command Complete for the Reset were allowed; on a loaded machine some are still
    # on their way when it is read (they are in the backlog), so only what follows counts.
    c.ok(RESET)
    c.backlog.clear()
    c.ok(LE_SET_SCAN_PARAMETERS, struct.pack('<BHHBB', 0, 0x10, 0x10, 0, 0))
    c.ok(LE_SET_SCAN_ENABLE, b'\x01\x00')
    assert [p for p in c.packets(0.5) if p[1] == 0x3E] == []


def test_beacon_heard_by_dut_legacy_scan_with_rssi_distribution(harness_factory, client_factory):
    beacon = f'{BEACON_UUID},{MAJOR},{MINOR},{POWER},20,D0:11:22:33:44:55'
    h = harness_factory('--beacon', beacon, '--rssi', 'gauss:-59,4', '--seed', '3')
    c = client_factory(h.device_spec)
    c.init()
    c.start_legacy_scan()
    packets = c.packets(2.5)
    assert le_meta(packets, 0x0D) == [], 'legacy scan must not get extended reports'
    reports = [parse_legacy_report(p) for p in le_meta(packets, 0x02)]
    assert 90 <= len(reports) <= 140, len(reports)  # one report per PDU (20 ms + advDelay)
    for report in reports:
        assert report['event_type'] == ADV_NONCONN_IND
        assert report['address'] == 'D0:11:22:33:44:55' and report['address_type'] == 0x01
        assert report['data'] == ibeacon_ad()
    rssi = [r['rssi'] for r in reports]
    assert abs(statistics.mean(rssi) - -59) < 1.5, statistics.mean(rssi)
    assert 3.0 < statistics.stdev(rssi) < 5.0, statistics.stdev(rssi)


@pytest.mark.parametrize(
    'model, check',
    [
        ('constant:-71', lambda r: set(r) == {-71}),
        ('na', lambda r: set(r) == {127}),
        # channels: offsets -10/0/+10 cycle per PDU, sigma 0.
        ('channels:-60,0,-10,0,10', lambda r: r[:6] == [-70, -60, -50, -70, -60, -50]),
        # fades: sigma 0, 50 % of packets 20 dB down.
        ('fades:-60,0,0.5,20', lambda r: set(r) == {-60, -80} and 0.25 < r.count(-80) / len(r) < 0.75),
    ],
)
def test_rssi_models(harness_factory, client_factory, model, check):
    h = harness_factory('--beacon', f'{BEACON_UUID},1,2,-59,20', '--rssi', model)
    c = client_factory(h.device_spec)
    c.init()
    c.start_legacy_scan()
    rssi = [parse_legacy_report(p)['rssi'] for p in le_meta(c.packets(0.6), 0x02)]
    assert len(rssi) >= 10
    assert check(rssi), rssi


def test_filter_duplicates(harness_factory, client_factory):
    h = harness_factory('--beacon', f'{BEACON_UUID},1,2,-59,20')
    c = client_factory(h.device_spec)
    c.init()
    c.start_legacy_scan(filter_duplicates=1)
    assert len(le_meta(c.packets(0.5), 0x02)) == 1


def test_extended_scan_gets_one_extended_report_per_pdu(harness_factory, client_factory):
    h = harness_factory('--beacon', f'{BEACON_UUID},{MAJOR},{MINOR},{POWER},50')
    c = client_factory(h.device_spec)
    c.init()
    # own public, accept all, 1M PHY: passive, interval=window=0x10
    c.ok(LE_SET_EXTENDED_SCAN_PARAMETERS, bytes([0, 0, 0x01, 0]) + struct.pack('<HH', 0x10, 0x10))
    c.ok(LE_SET_EXTENDED_SCAN_ENABLE, struct.pack('<BBHH', 1, 0, 0, 0))
    packets = c.packets(1.0)
    assert le_meta(packets, 0x02) == []
    reports = [parse_extended_report(p) for p in le_meta(packets, 0x0D)]
    assert 14 <= len(reports) <= 22, len(reports)
    for report in reports:
        assert report['event_type'] == 0x10  # legacy PDU, non-connectable, non-scannable
        assert report['data'] == ibeacon_ad()


def test_features_legacy_hides_extended_advertising(harness_factory, client_factory):
    ext = client_factory(harness_factory().device_spec)
    ext.init()
    features = ext.ok(LE_READ_LOCAL_SUPPORTED_FEATURES)[1:9]
    assert features[1] & 0x10, 'default DUT must claim LE Extended Advertising (bit 12)'
    commands = ext.ok(READ_LOCAL_SUPPORTED_COMMANDS)[1:]
    assert commands[36] & 0x02  # octet 36 bit 1: LE Set Extended Advertising Parameters

    legacy = client_factory(harness_factory('--features', 'legacy').device_spec)
    legacy.init()
    features = legacy.ok(LE_READ_LOCAL_SUPPORTED_FEATURES)[1:9]
    assert not features[1] & 0x10, 'bit 12 must be clear'
    assert features[0] & 0x01, 'other features (LE Encryption, bit 0) stay'
    commands = legacy.ok(READ_LOCAL_SUPPORTED_COMMANDS)[1:]
    assert not commands[36] & 0x02
    ext_params = bytes([0]) + struct.pack('<H', 0x10) + (160).to_bytes(3, 'little') * 2
    ext_params += bytes([0x07, 0x00, 0x00]) + bytes(6) + bytes([0x00, 0x7F, 0x01, 0x00, 0x01, 0x00, 0x00])
    assert legacy.command(LE_SET_EXTENDED_ADVERTISING_PARAMETERS, ext_params)[0] == 0x01
    assert legacy.command(LE_SET_EXTENDED_SCAN_ENABLE, struct.pack('<BBHH', 1, 0, 0, 0))[0] == 0x01
    # legacy advertising still works there
    legacy.start_legacy_advertising(100, ibeacon_ad())


def test_two_extended_advertising_sets_heard(harness_factory, client_factory):
    h = harness_factory('--scanner')
    c = client_factory(h.device_spec)
    c.init()
    addresses = {0: 'C1:00:00:00:00:0A', 1: 'C2:00:00:00:00:0B'}
    for handle, address in addresses.items():
        c.ok(LE_SET_ADVERTISING_SET_RANDOM_ADDRESS, bytes([handle]) + bdaddr(address))
        params = bytes([handle]) + struct.pack('<H', 0x0010)  # legacy PDUs, non-connectable
        params += (160 + 32 * handle).to_bytes(3, 'little') * 2  # 100 ms / 120 ms
        params += bytes([0x07, 0x01, 0x00]) + bytes(6)  # all channels, own random, peer
        params += bytes([0x00, 0x7F, 0x01, 0x00, 0x01, handle, 0x00])
        c.ok(LE_SET_EXTENDED_ADVERTISING_PARAMETERS, params)
        data = ibeacon_ad(minor=MINOR + handle)
        c.ok(LE_SET_EXTENDED_ADVERTISING_DATA, bytes([handle, 0x03, 0x01, len(data)]) + data)
    c.ok(LE_SET_EXTENDED_ADVERTISING_ENABLE, bytes([1, 2, 0, 0, 0, 0, 1, 0, 0, 0]))
    time.sleep(0.2)
    t0 = time.monotonic()
    time.sleep(1.0)
    for handle, address in addresses.items():
        heard = h.adv_events(since=t0, address=address)
        assert 6 <= len(heard) <= 13, (address, len(heard))
        assert all(e['ibeacon']['minor'] == MINOR + handle for e in heard)
        assert all(e['type'] == 'nonconn' and e['legacy'] for e in heard)
    # Disabling one set leaves the other running.
    c.ok(LE_SET_EXTENDED_ADVERTISING_ENABLE, bytes([0, 1, 0, 0, 0, 0]))
    time.sleep(0.2)
    t1 = time.monotonic()
    time.sleep(0.5)
    assert h.adv_events(since=t1, address=addresses[0]) == []
    assert len(h.adv_events(since=t1, address=addresses[1])) >= 2


def test_sequential_tcp_clients_and_mid_packet_disconnect(harness_factory, client_factory):
    h = harness_factory('--scanner')
    first = client_factory(h.device_spec)
    first.init()
    first.start_legacy_advertising(100, ibeacon_ad())
    first.write(bytes.fromhex('01030c'))  # half a Reset command, then vanish
    first.close()
    h.wait_for(lambda e: e['event'] == 'client' and e['state'] == 'disconnected')
    second = client_factory(h.device_spec)
    assert second.ok(READ_BD_ADDR)[1:7] == bdaddr(h.address)  # parser in sync
    # The controller kept its state across clients: still advertising.
    t0 = time.monotonic()
    h.wait_for(lambda e: e['event'] == 'adv' and e['address'] == h.address and e['t'] > t0, timeout=2)
    second.ok(LE_SET_ADVERTISING_ENABLE, b'\x00')
    # 'disconnect' closes the connection from the harness side.
    h.send('disconnect')
    with pytest.raises(ConnectionError):
        second.read_packet(2.0)


def test_pty_serial_path(harness_factory, client_factory):
    h = harness_factory('--pty')
    assert h.device_spec.startswith('serial:/dev/pts/')
    c = client_factory(h.device_spec)
    c.init()
    assert c.ok(READ_BD_ADDR)[1:7] == bdaddr(h.address)
    h.send('reset')
    assert c.read_packet(2.0) == bytes.fromhex('040e0401030c00')
    c.write(bytes.fromhex('01030c'))  # half a command, then close
    c.close()
    h.wait_for(lambda e: e['event'] == 'client' and e['state'] == 'disconnected', timeout=3)
    again = client_factory(h.device_spec)
    assert again.ok(READ_BD_ADDR)[1:7] == bdaddr(h.address)


def test_fault_injection(harness_factory, client_factory):
    h = harness_factory('--fail', '0x200A=0x0C', '--fail', '0x2006=none',
                        '--fail', '0x1009=late:400', '--garbage-after', '6')
    c = client_factory(h.device_spec)
    c.init()  # commands 1-3
    assert c.command(LE_SET_ADVERTISING_ENABLE, b'\x01')[0] == 0x0C  # 4
    with pytest.raises(TimeoutError):
        c.command(LE_SET_ADVERTISING_PARAMETERS, bytes(15), timeout=0.5)  # 5
    started = time.monotonic()
    assert c.command(READ_BD_ADDR)[0] == 0x00  # 6, answered late, then junk
    assert time.monotonic() - started >= 0.35
    deadline = time.monotonic() + 1.0
    while len(c.buffer) < 1 and time.monotonic() < deadline:
        c._fill(deadline - time.monotonic())
    assert c.buffer[:1] == b'\xff', c.buffer.hex()  # invalid H4 packet type


def test_slow_answers(harness_factory, client_factory):
    h = harness_factory('--slow', '300')
    c = client_factory(h.device_spec)
    started = time.monotonic()
    c.ok(READ_BD_ADDR)
    assert time.monotonic() - started >= 0.28


def test_trace_reports_dut_traffic(harness_factory, client_factory):
    h = harness_factory('--trace')
    c = client_factory(h.device_spec)
    c.ok(READ_BD_ADDR)
    assert c.command(0xFC55)[0] == 0x01
    h.wait_for(lambda e: e['event'] == 'hci' and e['dir'] == 'out' and e.get('opcode') == '0xFC55')
    trace = h.events('hci')
    assert {'dir': 'in', 'opcode': '0x1009'}.items() <= trace[0].items()
    assert {'dir': 'out', 'code': '0x0E', 'opcode': '0x1009', 'status': 0}.items() <= trace[1].items()
    assert {'dir': 'out', 'opcode': '0xFC55', 'status': 1}.items() <= trace[3].items()
