"""The H4 transports of the Bumble harness (bumble_harness.py runs them): TCP, a pseudo-terminal
(the serial path) and /dev/vhci (the Linux kernel as the host), and the peer beacons' spec."""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import errno
import os
import pty
import tty
import uuid as uuidlib

from bumble.transport.common import PacketParser

from harness_controller import APPLE_COMPANY_ID, DutController, H4Endpoint, emit, logger


# PATCH(12): one fresh H4 parser per connection, one client at a time.
class TcpClient(asyncio.Protocol, H4Endpoint):
    def __init__(self, server: 'TcpServer') -> None:
        self.server = server
        self.transport_: asyncio.Transport | None = None
        self.parser = PacketParser(self)
        self.connected = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport_ = transport  # type: ignore[assignment]
        self.connected = True
        self.server.attach(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except Exception as error:
            logger.warning('H4 parse error from client: %s', error)
            self.parser.reset()

    def on_packet(self, packet: bytes) -> None:
        if self.connected and self.server.dut.transport is self:
            self.server.dut.on_packet(packet)

    def connection_lost(self, exc: Exception | None) -> None:
        was = self.connected
        self.connected = False
        if was:
            self.server.detach(self)

    def write(self, data: bytes) -> None:
        if self.transport_ is not None and self.connected:
            self.transport_.write(data)

    def write_buffer_size(self) -> int:
        return self.transport_.get_write_buffer_size() if self.transport_ is not None else 0

    def close(self) -> None:
        if self.transport_ is not None:
            self.transport_.abort()

    def close_after_flush(self) -> None:
        if self.transport_ is not None:
            self.transport_.close()  # sends what is buffered first, then FIN



class TcpServer:
    def __init__(self, dut: DutController) -> None:
        self.dut = dut
        self.server: asyncio.AbstractServer | None = None

    async def start(self, spec: str) -> str:
        host, _, port = spec.rpartition(':')
        self.server = await asyncio.get_running_loop().create_server(
            lambda: TcpClient(self), host or '127.0.0.1', int(port)
        )
        sockname = self.server.sockets[0].getsockname()
        return f'{sockname[0]}:{sockname[1]}'

    def attach(self, client: TcpClient) -> None:
        old = self.dut.transport
        if isinstance(old, TcpClient) and old.connected:
            logger.warning('new client replaces the connected one')
            old.connected = False
            old.close()
            emit({'event': 'client', 'state': 'disconnected', 'replaced': True})
        self.dut.transport = client
        emit({'event': 'client', 'state': 'connected'})

    def detach(self, client: TcpClient) -> None:
        if self.dut.transport is client:
            self.dut.transport = None
        emit({'event': 'client', 'state': 'disconnected'})

    def disconnect(self) -> None:
        client = self.dut.transport
        if isinstance(client, TcpClient):
            client.close()


class PtyServer(H4Endpoint):
    """DUT on a pseudo-terminal. The harness holds only the primary side; a
    client opening/closing the slave is seen as connect/disconnect (reads on
    the primary fail with EIO while no slave is open)."""

    POLL_S = 0.05

    def __init__(self, dut: DutController, link_path: str | None) -> None:
        self.dut = dut
        self.link_path = link_path
        self.primary = -1
        self.path = ''
        self.connected = False
        self.parser: PacketParser | None = None
        self.poll_handle: asyncio.TimerHandle | None = None

    def open(self) -> str:
        primary, replica = pty.openpty()
        tty.setraw(replica)
        self.path = os.ttyname(replica)
        os.close(replica)
        os.set_blocking(primary, False)
        self.primary = primary
        if self.link_path:
            try:
                os.unlink(self.link_path)
            except FileNotFoundError:
                pass
            os.symlink(self.path, self.link_path)
            atexit.register(self._unlink)
        self._poll()
        return self.path

    def _unlink(self) -> None:
        if self.link_path and os.path.islink(self.link_path):
            os.unlink(self.link_path)

    def _poll(self) -> None:
        self.poll_handle = None
        if self.primary < 0:
            return
        try:
            data = os.read(self.primary, 4096)
        except BlockingIOError:
            self._on_connect(b'')
            return
        except OSError as error:
            if error.errno != errno.EIO:
                logger.warning('pty read: %s', error)
            self.poll_handle = asyncio.get_running_loop().call_later(self.POLL_S, self._poll)
            return
        self._on_connect(data)

    def _on_connect(self, first: bytes) -> None:
        self.connected = True
        self.parser = PacketParser(self)
        self.dut.transport = self
        emit({'event': 'client', 'state': 'connected'})
        asyncio.get_running_loop().add_reader(self.primary, self._on_readable)
        if first:
            self._feed(first)

    def _on_readable(self) -> None:
        try:
            data = os.read(self.primary, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b''
        if not data:
            self._on_disconnect()
            return
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        assert self.parser is not None
        try:
            self.parser.feed_data(data)
        except Exception as error:
            logger.warning('H4 parse error from pty client: %s', error)
            self.parser.reset()

    def on_packet(self, packet: bytes) -> None:
        if self.connected:
            self.dut.on_packet(packet)

    def _on_disconnect(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.primary)
        self.connected = False
        self.parser = None
        if self.dut.transport is self:
            self.dut.transport = None
        emit({'event': 'client', 'state': 'disconnected'})
        self.poll_handle = loop.call_later(self.POLL_S, self._poll)

    def write(self, data: bytes) -> None:
        if not self.connected:
            return
        try:
            os.write(self.primary, data)
        except BlockingIOError:
            logger.warning('pty full, dropping %d bytes', len(data))
        except OSError as error:
            logger.warning('pty write: %s', error)

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        if self.connected:
            loop.remove_reader(self.primary)
        if self.poll_handle is not None:
            self.poll_handle.cancel()
            self.poll_handle = None
        self.connected = False
        if self.dut.transport is self:
            self.dut.transport = None
        if self.primary >= 0:
            os.close(self.primary)
            self.primary = -1

    def disconnect(self) -> str:
        was_connected = self.connected
        self.close()
        if was_connected:
            emit({'event': 'client', 'state': 'disconnected'})
        return self.open()


# -----------------------------------------------------------------------------
# Peers
# -----------------------------------------------------------------------------
@dataclasses.dataclass
class BeaconSpec:
    uuid: uuidlib.UUID
    major: int
    minor: int
    power: int
    interval_ms: float
    address: str

    @classmethod
    def parse(cls, spec: str, index: int) -> 'BeaconSpec':
        parts = [p.strip() for p in spec.split(',')]
        if not 4 <= len(parts) <= 6:
            raise ValueError(f'bad --beacon {spec!r}')
        return cls(
            uuid=uuidlib.UUID(parts[0]),
            major=int(parts[1], 0),
            minor=int(parts[2], 0),
            power=int(parts[3], 0),
            interval_ms=float(parts[4]) if len(parts) > 4 and parts[4] else 100.0,
            address=parts[5] if len(parts) > 5 else f'D0:00:00:00:00:{index + 1:02X}',
        )

    def advertising_data(self) -> bytes:
        # Flags (LE General Discoverable, BR/EDR not supported) + Apple iBeacon.
        payload = (
            APPLE_COMPANY_ID.to_bytes(2, 'little')
            + bytes([0x02, 0x15])
            + self.uuid.bytes
            + self.major.to_bytes(2, 'big')
            + self.minor.to_bytes(2, 'big')
            + (self.power & 0xFF).to_bytes(1, 'big')
        )
        return bytes([0x02, 0x01, 0x06, len(payload) + 1, 0xFF]) + payload


class VhciServer(PtyServer):
    """The DUT behind the Linux kernel's virtual HCI driver (/dev/vhci): the kernel registers it
    as a new adapter hciN and drives it like any controller, so `ibeacon --device hciN` reaches
    this emulated controller through the real BlueZ socket path, with the RSSI the harness
    injects (btvirt's controllers report RSSI 127 only). One packet per read and per write,
    each with its H4 type byte, as drivers/bluetooth/hci_vhci.c expects."""

    HCI_VENDOR_PKT = 0xFF
    HCI_PRIMARY = 0x00

    def open(self) -> str:
        fd = os.open(self.link_path or '/dev/vhci', os.O_RDWR)
        # Creating the controller: a vendor packet with the device type; the kernel answers
        # with a vendor packet carrying the new adapter's index (hci_vhci.c vhci_create_device).
        os.write(fd, bytes([self.HCI_VENDOR_PKT, self.HCI_PRIMARY]))
        reply = os.read(fd, 4)
        if len(reply) != 4 or reply[0] != self.HCI_VENDOR_PKT:
            raise SystemExit(f'unexpected reply from /dev/vhci: {reply.hex()}')
        index = reply[2] | reply[3] << 8
        os.set_blocking(fd, False)
        self.primary = fd
        self.path = f'hci{index}'
        self._on_connect(b'')
        return self.path

    def _on_disconnect(self) -> None:
        # The adapter is gone with the descriptor; there is nothing to reconnect to.
        super()._on_disconnect()
        if self.poll_handle is not None:
            self.poll_handle.cancel()
            self.poll_handle = None
