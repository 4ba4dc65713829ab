#!/usr/bin/env python3
"""Emulated Bluetooth LE world for end-to-end tests of the `ibeacon` CLI.

Several Bumble `Controller`s share one in-process `LocalLink` (the "radio"):

* the DUT controller, exposed to an external host (`ibeacon`) as H4 over TCP
  (``--tcp 127.0.0.1:0`` picks a free port) or over a pseudo-terminal (``--pty``,
  the serial path);
* optionally a peer *scanner* (``--scanner``): a Bumble `Device` (host stack) on
  its own controller, scanning passively with duplicate filtering off, printing
  every advertisement it receives, decoded with Bumble's own AD parser (a
  decoder independent of `ibeacon`);
* zero or more peer *beacons* (``--beacon UUID,MAJOR,MINOR,POWER[,INTERVAL_MS[,ADDRESS]]``),
  each a Bumble `Device` on its own controller advertising an iBeacon as
  ADV_NONCONN_IND, so that `ibeacon scan` / `ibeacon calibrate` can hear it.

This file parses the options and runs the world; the controllers are in harness_controller.py,
the H4 transports (TCP, pty, /dev/vhci) in harness_transports.py.

Usage
-----
    python tests/harness/bumble_harness.py --tcp 127.0.0.1:0 --scanner \
        --beacon E2C56DB5-DFFB-48D2-B060-D0F5A71096E0,258,772,-59,100 \
        --rssi gauss:-59,4 --seed 1

    # then, in another shell:  ibeacon advertise --device tcp:127.0.0.1:PORT ...

Options
    --tcp HOST:PORT          DUT as H4 over TCP (default 127.0.0.1:0 = free port).
                             One client at a time; a new client replaces the old
                             one; the server keeps running across clients and the
                             controller keeps its state (advertise, then stop).
    --vhci [DEVICE]          DUT behind /dev/vhci: the Linux kernel registers it as a
                             new adapter and prints {"event":"ready","hci":"hciN"}
                             (used by `make test-kernel` for real RSSI on the BlueZ path).
    --pty [LINK]             DUT as H4 over a pseudo-terminal (serial path); prints
                             the slave path; optional LINK = symlink to it.
    --address BDADDR         DUT public address (default F0:F1:F2:F3:F4:F5).
    --features extended|legacy
                             legacy: LE feature bits 12 (extended advertising) and
                             13 (periodic advertising) cleared, extended
                             advertising/scan commands answered with Unknown HCI
                             Command (0x01) and not listed in Supported Commands.
    --scanner                start the peer scanner (prints "adv" events).
    --beacon SPEC            add a peer beacon (repeatable). INTERVAL_MS default
                             100; ADDRESS default D0:00:00:00:00:0N (random static).
    --rssi MODEL             RSSI reported by the DUT receiver:
                               constant:-59 | gauss:-59,4 | fades:-59,4,0.15,15
                               (15 % of packets 15 dB down) |
                               channels:-59,4,-2,0,2 (Gaussian plus offsets for
                               channels 37/38/39, cycled per received PDU and per
                               advertiser) | na (127, "not available") |
                               list:FILE (one "TIME RSSI" or "RSSI" line per
                               received PDU, replayed in order: ibeacon-calsim --dump).
                             Default constant:-59.
    --rssi-for ADDRESS=MODEL RSSI reported by the DUT receiver for the PDUs of the
                             advertiser ADDRESS (repeatable; --rssi for the others),
                             e.g. --rssi-for D0:00:00:00:00:02=constant:-75.
    --rssi-peer MODEL        RSSI reported by the peer scanner (default constant:-50).
    --seed N                 seed for RSSI and advDelay randomness (default 0).
    --no-adv-delay           disable the random 0-10 ms advDelay (Vol 6 Part B 4.4.2.2.1).
    --trace                  print DUT HCI traffic as "hci" events.
    --fail OPCODE=STATUS     answer OPCODE with STATUS without executing it
                             (Command Status for async commands, else a status-only
                             Command Complete), e.g. --fail 0x200A=0x0C.
    --fail OPCODE=none       never answer OPCODE (and do not execute it).
    --fail OPCODE=late:MS    execute OPCODE, answer it MS milliseconds later.
    --slow MS                delay every command answer by MS milliseconds.
    --garbage-after N        after the answer to the N-th command, write 8 junk
                             bytes (starting with the invalid H4 type 0xFF), once.
    --credits N              Num_HCI_Command_Packets in every Command Complete and
                             Command Status sent (default: as Bumble sets it, 1);
                             0 = a controller that never grants another command.
    --central                a peer *central* (a phone's BLE stack): connects to the DUT's
                             --address as soon as it advertises connectable, holds the
                             link (its GATT server answers the DUT host's ATT requests),
                             reads the DUT's GAP Device Name, and connects again as soon
                             as the link is dropped; prints "central" events. The
                             command "central-off" on stdin stops it.
    --peripheral             a peer *peripheral* (a keyboard): advertises connectable from its
                             public address E0:E1:E2:E3:E4:B0 and accepts the DUT host's
                             connection (the box opening a link itself); prints "peripheral"
                             events (connected, disconnected with how long it was held).
    --keep-running           do not quit when stdin reaches EOF (default: quit).
    --log-level LEVEL        stderr logging level (default WARNING).

Output: JSON lines on stdout, flushed:
    {"event":"ready","tcp":"127.0.0.1:PORT","address":"F0:F1:F2:F3:F4:F5",...}
    {"event":"ready","pty":"/dev/pts/N","address":...}
    {"event":"client","state":"connected"|"disconnected"}
    {"event":"pty","pty":"/dev/pts/M"}     new pty after a "disconnect" command
    {"event":"adv","t":<time.monotonic()>,"address":"..","address_type":"random"|"public",
     "rssi":..,"data":"<hex>","ibeacon":{"uuid":..,"major":..,"minor":..,"power":..}|null,
     "type":"nonconn|ind|scan|direct|scan_rsp|ext","legacy":bool,"sid":..}
    {"event":"hci","dir":"in"|"out",...}   with --trace (DUT traffic only)
    {"event":"ack","cmd":"reset","ok":true}
time.monotonic() is CLOCK_MONOTONIC, so "t" compares with the test process' clock.

Control over stdin, one command per line, each acknowledged with an "ack" event:
    reset       DUT loses all state as after an HCI_Reset from another host
                (advertising/scanning stopped, data/parameters/masks cleared) and
                emits an unsolicited Command Complete for 0x0C03, status 0.
    powercycle  same state loss, then Command Complete with opcode 0x0000 (NOP),
                Num_HCI_Command_Packets 1, as controllers send at power-up.
    hwerror     Hardware Error event (0x10) code 0x01, then state lost.
    foreign-stop  another host turns advertising off: every enabled extended set
                (then Command Complete for 0x2039, LE Set Extended Advertising
                Enable) or else the legacy advertiser (Command Complete for 0x200A),
                as a second program on a shared raw HCI socket would.
    disconnect  close the H4 TCP connection / the pty (a new pty is opened and
                announced with a "pty" event).
    central-off  the --central stops connecting (its ack has the time, "t").
    beacon-off N / beacon-on N
                the N-th --beacon (counted from 0) stops / starts advertising,
                while the DUT's client stays connected; the ack carries "t", the
                time.monotonic() just before the switch.
    cut-mid-packet  send the first 4 of the 7 bytes of a Command Complete event,
                then close the connection in an orderly way (TCP FIN; pty: closed
                and reopened as for disconnect).
    nop0        Command Complete with opcode 0x0000 (NOP) and Num_HCI_Command_Packets 0:
                "accept no command now", never followed by a credit.
    mute / unmute  the DUT drops every command unanswered (a hung controller; what it
                advertises stays on the air) / answers again. The ack carries "t".
    flood KIND SECONDS [MAX]
                send events as fast as the host reads them (the TCP send buffer is
                kept filled; pty too), for SECONDS or until MAX events (rounded up to
                512) have been sent, ignoring the event masks, then
                {"event":"flood","kind":..,"events":N,"bytes":N}. KIND:
                  report    LE Advertising Reports (a non-iBeacon ADV_NONCONN_IND)
                  malformed LE Meta events whose report count exceeds their length
                  hwerror   Hardware Error events (code 0x01), state lost once
                  ibeacon   LE Advertising Reports of the test iBeacon, RSSI -50…-70
    quit        exit.

Patches to the stock bumble 0.0.236 emulator (all by subclassing in this file;
site-packages is never edited). Each is marked "PATCH(n)" in the code:
  1. Legacy ADV_NONCONN_IND / ADV_SCAN_IND / ADV_DIRECT_IND were accepted but
     never transmitted (only ADV_IND): HarnessLegacyAdvertiser sends each type.
  2. Legacy interval was timed as N ms instead of N x 0.625 ms: now N x 0.625 ms
     (Advertising_Interval_Min) plus advDelay 0-10 ms.
  3. With extended advertising claimed, a legacy scan got Extended Advertising
     Reports, each twice (fake scan response): a legacy scan (LE Set Scan
     Enable) now gets one LE Advertising Report (0x02) per received legacy PDU
     and ignores extended PDUs; an extended scan gets one Extended Advertising
     Report (0x0D) per PDU with correct event-type bits (legacy bit for legacy PDUs).
  4. RSSI hard-coded -50: per-controller RSSI model (--rssi / --rssi-peer).
  5. Reset stopped nothing: HCI_Reset (and the reset/powercycle/hwerror control
     commands) stop advertising and scanning, clear advertising data/parameters/
     sets, scan parameters, random address, duplicate filter and event masks.
  6. Event masks ignored (stock stores them but never consults them): events are delivered only if enabled in Set Event Mask
     (default after reset 0x00001FFFFFFFFFFF: bit n = event code n+1); LE Meta
     events need bit 61 and the LE Event Mask bit (subevent code - 1; default
     0x1F), e.g. report 0x02 -> bit 1, extended report 0x0D -> bit 12.
     Command Complete/Status and Number Of Completed Packets are never masked.
  7. Scan interval/window ignored: a PDU is received only inside the scan window
     (phase of the scan interval since scan enable); extended scan parameters
     are stored too (1M PHY entry).
  8. Filter_Duplicates ignored: honoured per (address, event type, data) until
     scanning is re-enabled.
  9. Parameter values not validated: LE Set Advertising Parameters (interval
     0x0020-0x4000, min <= max, type <= 4, own address type <= 3, channel map
     1-7, policy <= 3; Command Disallowed while advertising), LE Set
     Advertising/Scan Response Data (32-octet parameter, length <= 31), LE Set
     Scan Parameters (interval/window 0x0004-0x4000, window <= interval), LE Set
     Advertising Enable (random own address not set -> 0x12), LE Set Random
     Address (0x0C while advertising or scanning), extended
     advertising (legacy PDUs with > 31 octets, unknown handle -> 0x42,
     parameters while enabled -> 0x0C) answer 0x12/0x0C/0x42 as the spec says.
 10. Unknown opcodes (generic HCI_Command: no event at all), unhandled known
     commands and handlers that answer nothing now get Command Complete with
     Unknown HCI Command (0x01); malformed parameters get 0x12.
 11. Default controller address 00:00:00:00:00:00: DUT and every peer get
     distinct non-zero public addresses.
 12. TCP client disconnecting mid-packet desynced the parser for the next client,
     and two clients got each other's replies: one fresh H4 parser per
     connection, one client at a time (a new one replaces the old).
 13. Extended advertising sets always sent AdvExtInd, even with legacy PDU
     properties, and re-enabling a set doubled its timer: sets with
     Use_Legacy_PDUs send the matching legacy PDU; enable restarts the timer.
     Several sets at once (two iBeacons from one DUT) work: one timer per set.
 14. Read Local Supported Commands listed a fixed set without the extended
     advertising commands: it is now computed from the handlers that exist
     (minus the ones hidden by --features legacy).
Not emulated: connections after reset (dropped silently), active-scan scan
responses, periodic advertising sync on the DUT, the legacy/extended command
mixing rule (Vol 4 Part E 3.1.1).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import signal
import sys
import threading
import time
import uuid as uuidlib
from typing import Any

from bumble import hci
from bumble.core import AdvertisingData
from bumble.device import AdvertisingType, Device
from bumble.link import LocalLink

from harness_controller import (APPLE_COMPANY_ID, DutController, HarnessController, PerAdvertiserRssi, RssiModel,
                                addr_str, emit, parse_fault)
from harness_transports import BeaconSpec, PtyServer, TcpClient, TcpServer, VhciServer


def decode_ibeacon(ad: AdvertisingData) -> dict[str, Any] | None:
    for value in ad.get_all(AdvertisingData.MANUFACTURER_SPECIFIC_DATA):
        company, data = value  # Bumble decodes (company_id, bytes)
        if company == APPLE_COMPANY_ID and len(data) == 23 and data[0] == 0x02 and data[1] == 0x15:
            return {
                'uuid': str(uuidlib.UUID(bytes=bytes(data[2:18]))).upper(),
                'major': int.from_bytes(data[18:20], 'big'),
                'minor': int.from_bytes(data[20:22], 'big'),
                'power': int.from_bytes(data[22:23], 'big', signed=True),
            }
    return None


def advertisement_type(adv: Any) -> str:
    if not adv.is_legacy:
        return 'ext'
    if adv.is_scan_response:
        return 'scan_rsp'
    if adv.is_directed:
        return 'direct'
    if adv.is_connectable:
        return 'ind'
    if adv.is_scannable:
        return 'scan'
    return 'nonconn'


def on_scanner_advertisement(adv: Any) -> None:
    emit(
        {
            'event': 'adv',
            't': time.monotonic(),
            'address': addr_str(adv.address),
            'address_type': 'public' if adv.address.address_type == 0 else 'random',
            'rssi': adv.rssi,
            'data': adv.data_bytes.hex(),
            'ibeacon': decode_ibeacon(adv.data),
            'type': advertisement_type(adv),
            'legacy': adv.is_legacy,
            'sid': adv.sid,
        }
    )


# -----------------------------------------------------------------------------
# Main
# -----------------------------------------------------------------------------
def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument('--tcp', metavar='HOST:PORT')
    transport.add_argument('--pty', nargs='?', const='', metavar='LINK')
    transport.add_argument('--vhci', nargs='?', const='', metavar='DEVICE',
                           help='DUT behind /dev/vhci: the kernel registers it as a new hciN (Linux only, root)')
    parser.add_argument('--address', default='F0:F1:F2:F3:F4:F5')
    parser.add_argument('--features', choices=('extended', 'legacy'), default='extended')
    parser.add_argument('--scanner', action='store_true')
    parser.add_argument('--beacon', action='append', default=[])
    parser.add_argument('--rssi', default='constant:-59')
    parser.add_argument('--rssi-for', action='append', default=[])
    parser.add_argument('--rssi-peer', default='constant:-50')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--no-adv-delay', action='store_true')
    parser.add_argument('--trace', action='store_true')
    parser.add_argument('--fail', action='append', default=[])
    parser.add_argument('--slow', type=int, default=0, metavar='MS')
    parser.add_argument('--garbage-after', type=int, default=None, metavar='N')
    parser.add_argument('--credits', type=int, default=None, metavar='N')
    parser.add_argument('--central', action='store_true')
    parser.add_argument('--peripheral', action='store_true')
    parser.add_argument('--keep-running', action='store_true')
    parser.add_argument('--log-level', default='WARNING')
    return parser


async def start_peer_device(
    name: str, controller: HarnessController, address: str
) -> Device:
    device = Device.with_hci(name, hci.Address(address), controller, controller)
    await device.power_on()
    return device


async def start_beacon(device: Device, spec: 'BeaconSpec') -> None:
    await device.start_advertising(
        advertising_type=AdvertisingType.UNDIRECTED,
        own_address_type=hci.OwnAddressType.RANDOM,
        advertising_data=spec.advertising_data(),
        advertising_interval_min=spec.interval_ms,
        advertising_interval_max=spec.interval_ms,
    )


CENTRAL = {'on': True}


async def central_loop(device: Device, target: hci.Address) -> None:
    """--central: connect to `target`, hold the link and read its Device Name, connect again as
    soon as it is dropped. One "central" event per connection, disconnection, read and failure."""
    from bumble.core import UUID

    while CENTRAL['on']:
        try:
            connection = await device.connect(target, timeout=60)
        except Exception as error:  # noqa: BLE001 - a test peer reports and tries again
            emit({'event': 'central', 'what': 'connect-failed', 't': time.monotonic(), 'error': str(error)})
            await asyncio.sleep(0.05)
            continue
        start = time.monotonic()
        emit({'event': 'central', 'what': 'connected', 't': start})
        gone = asyncio.Event()
        connection.on('disconnection', lambda *_: gone.set())

        async def read_name() -> None:
            try:
                values = await connection.gatt_client.read_characteristics_by_uuid(UUID.from_16_bits(0x2A00))
                emit({'event': 'central', 'what': 'read', 't': time.monotonic(),
                      'name': [bytes(v).decode('utf-8', 'replace') for v in values]})
            except Exception as error:  # noqa: BLE001 - the link went down first
                emit({'event': 'central', 'what': 'read-failed', 't': time.monotonic(), 'error': type(error).__name__})

        reader = asyncio.create_task(read_name())
        await gone.wait()
        reader.cancel()
        emit({'event': 'central', 'what': 'disconnected', 't': time.monotonic(), 'held': time.monotonic() - start})


async def switch_beacon(beacon_devices: list[tuple[Device, 'BeaconSpec']], argument: str, on: bool) -> dict[str, Any]:
    """beacon-on / beacon-off N: the N-th --beacon (from 0) starts or stops advertising; the
    observer's link is untouched. Returns fields for the ack (the switch time, or an error)."""
    try:
        device, spec = beacon_devices[int(argument)]
    except (ValueError, IndexError):
        return {'ok': False, 'error': f'no beacon {argument!r} (0..{len(beacon_devices) - 1})'}
    t = time.monotonic()  # before: the first advertisement may go out inside start_advertising
    if on and not device.is_advertising:
        await start_beacon(device, spec)
    elif not on and device.is_advertising:
        await device.stop_advertising()
    return {'t': t, 'beacon': int(argument), 'on': on}


async def run(args: argparse.Namespace) -> int:
    link = LocalLink()
    faults = dict(parse_fault(f) for f in args.fail)
    use_adv_delay = not args.no_adv_delay
    dut = DutController(
        'dut',
        link,
        args.address,
        PerAdvertiserRssi(
            RssiModel(args.rssi, random.Random(args.seed)),
            dict(PerAdvertiserRssi.parse(spec, random.Random(args.seed + 3000 + i))
                 for i, spec in enumerate(args.rssi_for))),
        random.Random(args.seed + 1000),
        legacy_only=args.features == 'legacy',
        use_adv_delay=use_adv_delay,
        faults=faults,
        slow_ms=args.slow,
        garbage_after=args.garbage_after,
        trace=args.trace,
    )
    dut.credits = args.credits

    devices: list[Device] = []
    ready: dict[str, Any] = {'event': 'ready', 'address': args.address, 'features': args.features}
    beacons = []
    beacon_devices: list[tuple[Device, BeaconSpec]] = []
    for index, spec_text in enumerate(args.beacon):
        spec = BeaconSpec.parse(spec_text, index)
        controller = HarnessController(
            f'beacon{index}', link, f'E0:E1:E2:E3:E4:{index + 0x10:02X}',
            RssiModel(args.rssi_peer, random.Random(args.seed + 2 + index)),
            random.Random(args.seed + 3000 + index), use_adv_delay=use_adv_delay,
        )
        device = await start_peer_device(f'beacon{index}', controller, spec.address)
        await start_beacon(device, spec)
        devices.append(device)
        beacon_devices.append((device, spec))
        beacons.append(spec.address)
    if beacons:
        ready['beacons'] = beacons
    if args.scanner:
        controller = HarnessController(
            'scanner', link, 'E0:E1:E2:E3:E4:01',
            RssiModel(args.rssi_peer, random.Random(args.seed + 1)),
            random.Random(args.seed + 2001), use_adv_delay=use_adv_delay,
        )
        scanner = await start_peer_device('scanner', controller, 'C0:00:00:00:00:5C')
        scanner.on('advertisement', on_scanner_advertisement)
        await scanner.start_scanning(
            active=False, filter_duplicates=False, scan_interval=100, scan_window=100
        )
        devices.append(scanner)
        ready['scanner'] = 'E0:E1:E2:E3:E4:01'

    if args.central:
        controller = HarnessController(
            'central', link, 'E0:E1:E2:E3:E4:C0',
            RssiModel(args.rssi_peer, random.Random(args.seed + 5)),
            random.Random(args.seed + 5001), use_adv_delay=use_adv_delay,
        )
        central_controller = controller
        central = await start_peer_device('central', controller, 'C0:00:00:00:00:C0')
        devices.append(central)
        ready['central'] = 'E0:E1:E2:E3:E4:C0'

    if args.peripheral:
        controller = HarnessController(
            'peripheral', link, 'E0:E1:E2:E3:E4:B0',
            RssiModel(args.rssi_peer, random.Random(args.seed + 6)),
            random.Random(args.seed + 6001), use_adv_delay=use_adv_delay,
        )
        peripheral = await start_peer_device('peripheral', controller, 'E0:E1:E2:E3:E4:B0')

        def on_connection(connection: Any) -> None:
            start = time.monotonic()
            emit({'event': 'peripheral', 'what': 'connected', 't': start, 'peer': str(connection.peer_address)})
            connection.on('disconnection', lambda *_: emit(
                {'event': 'peripheral', 'what': 'disconnected', 't': time.monotonic(),
                 'held': time.monotonic() - start}))

        peripheral.on('connection', on_connection)
        await peripheral.start_advertising(
            advertising_type=AdvertisingType.UNDIRECTED_CONNECTABLE_SCANNABLE,
            own_address_type=hci.OwnAddressType.PUBLIC, auto_restart=True,
            advertising_interval_min=100, advertising_interval_max=100,
        )
        devices.append(peripheral)
        ready['peripheral'] = 'E0:E1:E2:E3:E4:B0'

    tcp_server: TcpServer | None = None
    pty_server: PtyServer | None = None
    if args.vhci is not None:
        pty_server = VhciServer(dut, args.vhci or None)
        ready['hci'] = pty_server.open()
    elif args.pty is not None:
        pty_server = PtyServer(dut, args.pty or None)
        ready['pty'] = pty_server.open()
    else:
        tcp_server = TcpServer(dut)
        ready['tcp'] = await tcp_server.start(args.tcp or '127.0.0.1:0')
    emit(ready)
    central_task: asyncio.Task[None] | None = None
    if args.central:
        target = hci.Address(args.address, hci.Address.PUBLIC_DEVICE_ADDRESS)
        central_task = asyncio.create_task(central_loop(central, target))

    # Control loop over stdin (read in a thread: works for pipes, ttys and files).
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str] = asyncio.Queue()

    def read_stdin() -> None:
        for text in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, text)
        loop.call_soon_threadsafe(lines.put_nowait, '')

    threading.Thread(target=read_stdin, daemon=True).start()
    while True:
        line = await lines.get()
        if not line:
            if args.keep_running:
                await asyncio.Event().wait()
            break
        cmd = line.strip()
        if not cmd:
            continue
        ack: dict[str, Any] = {'event': 'ack', 'cmd': cmd, 'ok': True}
        if cmd == 'reset':
            dut.control_reset()
        elif cmd == 'powercycle':
            dut.control_powercycle()
        elif cmd == 'hwerror':
            dut.control_hwerror()
        elif cmd == 'foreign-stop':
            dut.control_foreign_stop()
        elif cmd == 'nop0':
            dut.control_nop0()
        elif cmd in ('mute', 'unmute'):
            dut.muted = cmd == 'mute'
            ack['t'] = time.monotonic()
        elif cmd.startswith('flood ') and len(cmd.split()) in (3, 4) and cmd.split()[1] in DutController.FLOOD_EVENTS:
            _, kind, seconds, *limit = cmd.split()
            emit(ack)  # acknowledged at the start; the result follows as a "flood" event
            emit(await dut.flood(kind, float(seconds), int(limit[0]) if limit else None))
            continue
        elif cmd == 'cut-mid-packet':
            endpoint = dut.transport
            if endpoint is not None and endpoint.connected:
                endpoint.write(bytes([0x04, 0x0E, 0x04, 0x01]))  # Command Complete, cut after 4 of 7 bytes
            if isinstance(endpoint, TcpClient):
                endpoint.close_after_flush()
            elif pty_server is not None:
                dut.transport = None  # nothing more after the partial packet
                await asyncio.sleep(0.2)  # let the client read it before the close
                emit({'event': 'pty', 'pty': pty_server.disconnect()})
        elif cmd == 'disconnect':
            if tcp_server is not None:
                tcp_server.disconnect()
            elif pty_server is not None:
                emit({'event': 'pty', 'pty': pty_server.disconnect()})
        elif cmd.split()[0] in ('beacon-on', 'beacon-off') and len(cmd.split()) == 2:
            ack.update(await switch_beacon(beacon_devices, cmd.split()[1], cmd.startswith('beacon-on')))
        elif cmd == 'central-off' and central_task is not None:
            CENTRAL['on'] = False
            central_task.cancel()
            # Bumble's LE Create Connection Cancel answers success but keeps the pending
            # connection, which would connect at the next advertisement: forget it.
            central_controller.pending_le_connection = None
            ack['t'] = time.monotonic()
        elif cmd == 'quit':
            emit(ack)
            break
        else:
            ack.update(ok=False, error='unknown command')
        emit(ack)

    if pty_server is not None:
        pty_server.close()
        pty_server._unlink()
    if tcp_server is not None and tcp_server.server is not None:
        tcp_server.server.close()
    return 0


def main() -> int:
    args = build_arg_parser().parse_args()
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format='%(asctime)s %(name)s %(levelname)s %(message)s',
    )
    try:
        for spec in [args.rssi, args.rssi_peer]:
            RssiModel(spec, random.Random(0))
        for spec in args.rssi_for:
            PerAdvertiserRssi.parse(spec, random.Random(0))
        for spec in args.fail:
            parse_fault(spec)
        for index, spec in enumerate(args.beacon):
            BeaconSpec.parse(spec, index)
    except ValueError as error:
        print(f'bumble_harness: {error}', file=sys.stderr)
        return 2
    # SIGTERM: exit through SystemExit so atexit cleanup (pty symlink) runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    return asyncio.run(run(args))


if __name__ == '__main__':
    sys.exit(main())
