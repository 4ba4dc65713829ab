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
import atexit
import dataclasses
import errno
import json
import logging
import os
import pty
import random
import signal
import sys
import threading
import time
import tty
import uuid as uuidlib
from typing import Any

from bumble import controller as bumble_controller
from bumble import hci, ll
from bumble.core import AdvertisingData
from bumble.device import AdvertisingType, Device
from bumble.link import LocalLink
from bumble.transport.common import PacketParser

logger = logging.getLogger('bumble_harness')

# Event mask defaults after HCI_Reset (Vol 4 Part E 7.3.1 and 7.8.1).
DEFAULT_EVENT_MASK = 0x00001FFFFFFFFFFF
DEFAULT_LE_EVENT_MASK = 0x000000000000001F
# Events that are not maskable.
UNMASKABLE_EVENTS = {
    hci.HCI_COMMAND_COMPLETE_EVENT,
    hci.HCI_COMMAND_STATUS_EVENT,
    hci.HCI_NUMBER_OF_COMPLETED_PACKETS_EVENT,
}
LE_META_EVENT_BIT = 61

# Extended advertising / scanning commands hidden by --features legacy.
EXTENDED_OPCODES = set(range(0x2035, 0x2047)) | {0x207F, 0x2080}

APPLE_COMPANY_ID = 0x004C

# Legacy PDU classes and their LE Advertising Report event types
# (Vol 4 Part E 7.7.65.2) and Extended Advertising Report event-type bits
# (7.7.65.13: bit0 connectable, bit1 scannable, bit2 directed, bit4 legacy).


@dataclasses.dataclass
class AdvScanInd(ll.AdvertisingPdu):
    """ADV_SCAN_IND (missing from bumble.ll)."""

    advertiser_address: hci.Address
    data: bytes


@dataclasses.dataclass
class AdvExtIndWithProperties(ll.AdvExtInd):
    """AdvExtInd carrying the set's event properties (connectable/scannable...)."""

    properties: int = 0


def legacy_report_type(pdu: Any) -> int | None:
    if isinstance(pdu, ll.AdvInd):
        return 0x00
    if isinstance(pdu, ll.AdvDirectInd):
        return 0x01
    if isinstance(pdu, AdvScanInd):
        return 0x02
    if isinstance(pdu, ll.AdvNonConnInd):
        return 0x03
    return None


LEGACY_TO_EXTENDED_TYPE = {0x00: 0x13, 0x01: 0x15, 0x02: 0x12, 0x03: 0x10}


# -----------------------------------------------------------------------------
# Output
# -----------------------------------------------------------------------------
def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(',', ':')) + '\n')
    sys.stdout.flush()


def addr_str(address: hci.Address) -> str:
    return address.to_string(False)


# -----------------------------------------------------------------------------
# RSSI models (PATCH 4)
# -----------------------------------------------------------------------------
class RssiModel:
    RSSI_NOT_AVAILABLE = 127

    def __init__(self, spec: str, rng: random.Random) -> None:
        self.spec = spec
        self.rng = rng
        self.channel_counters: dict[str, int] = {}
        kind, _, args = spec.partition(':')
        self.kind = kind
        if kind == 'list':
            # One report per line, "TIME RSSI" (ibeacon-calsim --dump) or "RSSI": replayed in
            # order, one value per received PDU, from the start again when exhausted.
            self.values = [int(line.split()[-1]) for line in open(args) if line.strip()]
            if not self.values:
                raise ValueError(f'RSSI list {args!r} is empty')
            self.next_index = 0
            return
        values = [float(v) for v in args.split(',')] if args else []
        if kind == 'constant' and len(values) == 1:
            self.mean = values[0]
        elif kind == 'gauss' and len(values) == 2:
            self.mean, self.sigma = values
        elif kind == 'fades' and len(values) == 4:
            self.mean, self.sigma, self.fade_probability, self.fade_db = values
        elif kind == 'channels' and len(values) == 5:
            self.mean, self.sigma = values[0], values[1]
            self.offsets = values[2:]
        elif kind == 'na' and not values:
            pass
        else:
            raise ValueError(f'bad RSSI model {spec!r}')

    def sample(self, advertiser: str) -> int:
        if self.kind == 'na':
            return self.RSSI_NOT_AVAILABLE
        if self.kind == 'list':
            value = self.values[self.next_index % len(self.values)]
            self.next_index += 1
            return max(-127, min(20, value))
        if self.kind == 'constant':
            value = self.mean
        else:
            value = self.rng.gauss(self.mean, self.sigma)
            if self.kind == 'fades' and self.rng.random() < self.fade_probability:
                value -= self.fade_db
            elif self.kind == 'channels':
                # Cycle channels 37/38/39 per received PDU, per advertiser.
                n = self.channel_counters.get(advertiser, 0)
                self.channel_counters[advertiser] = n + 1
                value += self.offsets[n % 3]
        # Valid RSSI range -127..+20 dBm (Vol 4 Part E 7.7.65.2).
        return max(-127, min(20, int(round(value))))


class PerAdvertiserRssi:
    """--rssi-for ADDRESS=MODEL: the model of the advertiser's address, else the default one."""

    def __init__(self, default: RssiModel, overrides: dict[str, RssiModel]) -> None:
        self.default = default
        self.overrides = overrides

    @staticmethod
    def parse(spec: str, rng: random.Random) -> tuple[str, RssiModel]:
        address, sep, model = spec.partition('=')
        if not sep or len(address.split(':')) != 6:
            raise ValueError(f'bad --rssi-for {spec!r}: expected ADDRESS=MODEL')
        return address.upper(), RssiModel(model, rng)

    def sample(self, advertiser: str) -> int:
        model = self.overrides.get(advertiser.split('/')[0].upper(), self.default)
        return model.sample(advertiser)


# -----------------------------------------------------------------------------
# Advertisers
# -----------------------------------------------------------------------------
def adv_delay(controller: 'HarnessController') -> float:
    # advDelay: pseudo-random 0-10 ms per advertising event (Vol 6 Part B 4.4.2.2.1).
    return controller.rng.uniform(0.0, 0.010) if controller.use_adv_delay else 0.0


def call_at_next_event(advertiser: object, period: float, callback) -> asyncio.TimerHandle:
    """Schedule the advertiser's next event `period` after its previous one was due, not after
    the late moment the timer fired: a controller's advertising events are kept by its own
    clock, whatever the host's load, so a busy test machine delays PDUs but does not drop them
    (nor fewer reach a scanner per second). After a stall of more than a second the schedule
    starts again from now instead of sending the backlog in one burst."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    due = getattr(advertiser, '_harness_due', None)
    due = now + period if due is None or due + period < now - 1.0 else due + period
    setattr(advertiser, '_harness_due', due)
    return loop.call_at(due, callback)


def make_legacy_pdu(adv_type: int, address: hci.Address, data: bytes, target: hci.Address) -> ll.AdvertisingPdu:
    if adv_type == 0x00:
        return ll.AdvInd(advertiser_address=address, data=data)
    if adv_type in (0x01, 0x04):
        return ll.AdvDirectInd(advertiser_address=address, target_address=target)
    if adv_type == 0x02:
        return AdvScanInd(advertiser_address=address, data=data)
    return ll.AdvNonConnInd(advertiser_address=address, data=data)


@dataclasses.dataclass
class HarnessLegacyAdvertiser(bumble_controller.LegacyAdvertiser):
    def _on_timer_fired(self) -> None:
        self.send_advertising_data()
        # PATCH(2): interval in units of 0.625 ms, plus advDelay.
        controller: HarnessController = self.controller  # type: ignore[assignment]
        interval = max(self.advertising_interval_min, 0x0020) * 0.000625
        self.timer_handle = call_at_next_event(self, interval + adv_delay(controller), self._on_timer_fired)

    def send_advertising_data(self) -> None:
        if not self.enabled:
            return
        # PATCH(1): transmit every legacy PDU type, not only ADV_IND.
        self.controller.send_advertising_pdu(
            make_legacy_pdu(
                self.advertising_type, self.address, self.advertising_data, self.peer_address
            )
        )


@dataclasses.dataclass
class HarnessAdvertisingSet(bumble_controller.AdvertisingSet):
    def start(self) -> None:
        # PATCH(13): re-enabling an enabled set must not start a second timer.
        self.stop()
        super().start()

    def _on_extended_advertising_timer_fired(self) -> None:
        if not self.enabled:
            return
        self.send_extended_advertising_data()
        interval = (
            self.parameters.primary_advertising_interval_min * 0.000625
            if self.parameters
            else 1.0
        )
        controller: HarnessController = self.controller  # type: ignore[assignment]
        self.timer_handle = call_at_next_event(
            self, max(interval, 0.02) + adv_delay(controller), self._on_extended_advertising_timer_fired
        )

    def send_extended_advertising_data(self) -> None:
        if not self.controller.link or not self.parameters:
            return
        address = self.address
        if address is None:
            return
        properties = int(self.parameters.advertising_event_properties)
        if properties & 0x10:
            # PATCH(13): Use_Legacy_PDUs -> the matching legacy PDU.
            connectable, scannable, directed = properties & 1, properties & 2, properties & 4
            if directed:
                adv_type = 0x01
            elif connectable:
                adv_type = 0x00
            elif scannable:
                adv_type = 0x02
            else:
                adv_type = 0x03
            pdu = make_legacy_pdu(adv_type, address, bytes(self.data), self.parameters.peer_address)
        else:
            pdu = AdvExtIndWithProperties(
                advertiser_address=address,
                data=bytes(self.data),
                sid=self.parameters.advertising_sid,
                properties=properties,
            )
        self.controller.send_advertising_pdu(pdu)


# -----------------------------------------------------------------------------
# Controller
# -----------------------------------------------------------------------------
def status(code: int) -> hci.HCI_StatusReturnParameters:
    return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode(code))


SUCCESS = 0x00
UNKNOWN_HCI_COMMAND = 0x01
UNKNOWN_ADVERTISING_IDENTIFIER = 0x42
COMMAND_DISALLOWED = 0x0C
INVALID_PARAMETERS = 0x12


class HarnessController(bumble_controller.Controller):
    """Bumble Controller with the PATCHes listed in the module docstring."""

    def __init__(
        self,
        name: str,
        link: LocalLink,
        public_address: str,
        rssi_model: RssiModel | PerAdvertiserRssi,
        rng: random.Random,
        legacy_only: bool = False,
        use_adv_delay: bool = True,
    ) -> None:
        # PATCH(11): a real, non-zero public address.
        super().__init__(
            name,
            link=link,
            public_address=hci.Address(public_address, hci.Address.PUBLIC_DEVICE_ADDRESS),
        )
        self.rssi_model = rssi_model
        self.rng = rng
        self.use_adv_delay = use_adv_delay
        self.blocked_opcodes: set[int] = set()
        if legacy_only:
            self.le_features = hci.LeFeatureMask(
                self.le_features
                & ~hci.LeFeatureMask.LE_EXTENDED_ADVERTISING
                & ~hci.LeFeatureMask.LE_PERIODIC_ADVERTISING
            )
            self.blocked_opcodes = set(EXTENDED_OPCODES)
        self.reset_state()

    # PATCH(5): everything HCI_Reset must clear.
    def reset_state(self) -> None:
        self.le_legacy_advertiser.stop()
        # Defaults of LE Set Advertising Parameters (Vol 4 Part E 7.8.5).
        self.le_legacy_advertiser = HarnessLegacyAdvertiser(
            self,
            advertising_interval_min=0x0800,
            advertising_interval_max=0x0800,
            advertising_channel_map=0x07,
        )
        for advertising_set in self.advertising_sets.values():
            advertising_set.stop()
        self.advertising_sets.clear()
        self.le_scan_enable = False
        self.scan_mode: str | None = None  # 'legacy' | 'extended'
        self.scan_started_at = 0.0
        self.filter_duplicates = False
        self.duplicates_seen: set[tuple[Any, ...]] = set()
        self.le_scan_type = 0
        self.le_scan_interval = 0x0010
        self.le_scan_window = 0x0010
        self.le_scan_own_address_type = 0
        self.le_scanning_filter_policy = 0
        self.ext_scan_interval = 0x0010
        self.ext_scan_window = 0x0010
        self.ext_scan_type = 0
        self.event_mask = DEFAULT_EVENT_MASK
        self.event_mask_page_2 = 0
        self.le_event_mask = DEFAULT_LE_EVENT_MASK
        self._random_address = hci.Address('00:00:00:00:00:00')
        self.pending_le_connection = None
        self.pending_periodic_advertising_syncs.clear()
        self.established_periodic_advertising_syncs.clear()
        self.le_address_resolution = False

    # PATCH(6): event masks.
    def event_allowed(self, packet: bytes) -> bool:
        if len(packet) < 3 or packet[0] != hci.HCI_EVENT_PACKET:
            return True
        code = packet[1]
        if code in UNMASKABLE_EVENTS:
            return True
        if code == hci.HCI_LE_META_EVENT:
            if not (self.event_mask >> LE_META_EVENT_BIT) & 1:
                return False
            if len(packet) < 4:
                return False
            subevent = packet[3]
            return bool((self.le_event_mask >> (subevent - 1)) & 1)
        if 1 <= code <= 64:
            return bool((self.event_mask >> (code - 1)) & 1)
        return True

    def send_hci_packet(self, packet: hci.HCI_Packet) -> None:
        raw = bytes(packet)
        if not self.event_allowed(raw):
            logger.debug('[%s] masked event %s', self.name, raw.hex())
            return
        if self.host:
            asyncio.get_running_loop().call_soon(self.host.on_packet, raw)

    # PATCH(10): every command gets an answer.
    def has_handler(self, op_code: int) -> bool:
        if op_code in self.blocked_opcodes:
            return False
        name = hci.HCI_Command.command_name(op_code)
        return hasattr(self, f'on_{name.lower()}')

    def answer_status(self, op_code: int, code: int) -> None:
        cls = hci.HCI_Command.command_classes.get(op_code)
        if cls is not None and issubclass(cls, hci.HCI_AsyncCommand) and code != UNKNOWN_HCI_COMMAND:
            self.send_hci_packet(
                hci.HCI_Command_Status_Event(
                    status=code, num_hci_command_packets=1, command_opcode=op_code
                )
            )
        else:
            self.send_hci_packet(
                hci.HCI_Command_Complete_Event(
                    num_hci_command_packets=1,
                    command_opcode=op_code,
                    return_parameters=status(code),
                )
            )

    def on_packet(self, packet: bytes) -> None:
        if packet and packet[0] == hci.HCI_COMMAND_PACKET and len(packet) >= 4:
            op_code = packet[1] | packet[2] << 8
            try:
                command = hci.HCI_Packet.from_bytes(packet)
            except Exception as error:  # malformed parameters
                logger.warning('[%s] malformed command %s: %s', self.name, packet.hex(), error)
                self.answer_status(op_code, INVALID_PARAMETERS)
                return
            self.on_hci_packet(command)
            return
        super().on_packet(packet)

    def on_hci_command_packet(self, command: hci.HCI_Command) -> None:
        op_code = command.op_code
        if not self.has_handler(op_code):
            logger.info('[%s] unknown/unsupported command 0x%04X', self.name, op_code)
            self.answer_status(op_code, UNKNOWN_HCI_COMMAND)
            return
        handler = getattr(self, f'on_{command.name.lower()}')
        try:
            result = handler(command)
        except Exception:
            logger.exception('[%s] handler for 0x%04X failed', self.name, op_code)
            result = None
        if result is not None:
            if isinstance(command, hci.HCI_AsyncCommand):
                self.answer_status(op_code, int(getattr(result, 'status', UNKNOWN_HCI_COMMAND)))
            else:
                self.send_hci_packet(
                    hci.HCI_Command_Complete_Event(
                        num_hci_command_packets=1,
                        command_opcode=op_code,
                        return_parameters=result,
                    )
                )
        elif not isinstance(command, hci.HCI_AsyncCommand):
            self.answer_status(op_code, UNKNOWN_HCI_COMMAND)

    # PATCH(14): supported commands from the handlers that exist.
    def on_hci_read_local_supported_commands_command(self, _command):
        mask = 0
        for op_code, bits in hci.HCI_SUPPORTED_COMMANDS_MASKS.items():
            if self.has_handler(op_code):
                mask |= bits
        return hci.HCI_Read_Local_Supported_Commands_ReturnParameters(
            status=hci.HCI_ErrorCode.SUCCESS, supported_commands=mask.to_bytes(64, 'little')
        )

    def on_hci_reset_command(self, _command):
        self.reset_state()
        return status(SUCCESS)

    # PATCH(9): legacy advertising validation.
    def on_hci_le_set_random_address_command(self, command):
        # Vol 4 Part E 7.8.4: disallowed while legacy advertising or scanning is enabled.
        if self.le_legacy_advertiser.enabled or self.le_scan_enable:
            return status(COMMAND_DISALLOWED)
        return super().on_hci_le_set_random_address_command(command)

    def on_hci_le_set_advertising_parameters_command(self, command):
        if self.le_legacy_advertiser.enabled:
            return status(COMMAND_DISALLOWED)
        directed_high = command.advertising_type == 0x01
        if (
            command.advertising_type > 0x04
            or command.own_address_type > 0x03
            or command.peer_address_type > 0x01
            or not (1 <= command.advertising_channel_map <= 7)
            or command.advertising_filter_policy > 0x03
            or (
                not directed_high
                and (
                    not (0x0020 <= command.advertising_interval_min <= 0x4000)
                    or not (0x0020 <= command.advertising_interval_max <= 0x4000)
                    or command.advertising_interval_min > command.advertising_interval_max
                )
            )
        ):
            return status(INVALID_PARAMETERS)
        return super().on_hci_le_set_advertising_parameters_command(command)

    def on_hci_le_set_advertising_data_command(self, command):
        raw = command.parameters
        if len(raw) != 32 or raw[0] > 31:
            return status(INVALID_PARAMETERS)
        self.le_legacy_advertiser.advertising_data = bytes(raw[1 : 1 + raw[0]])
        return status(SUCCESS)

    def on_hci_le_set_scan_response_data_command(self, command):
        raw = command.parameters
        if len(raw) != 32 or raw[0] > 31:
            return status(INVALID_PARAMETERS)
        self.le_legacy_advertiser.scan_response_data = bytes(raw[1 : 1 + raw[0]])
        return status(SUCCESS)

    def on_hci_le_set_advertising_enable_command(self, command):
        if command.advertising_enable > 1:
            return status(INVALID_PARAMETERS)
        advertiser = self.le_legacy_advertiser
        if (
            command.advertising_enable
            and advertiser.own_address_type in (0x01, 0x03)
            and self.random_address == hci.Address('00:00:00:00:00:00')
        ):
            return status(INVALID_PARAMETERS)
        return super().on_hci_le_set_advertising_enable_command(command)

    # PATCH(13): sets are HarnessAdvertisingSet; validation (PATCH 9).
    def _advertising_set(self, handle: int) -> HarnessAdvertisingSet:
        if handle not in self.advertising_sets:
            self.advertising_sets[handle] = HarnessAdvertisingSet(controller=self, handle=handle)
        return self.advertising_sets[handle]  # type: ignore[return-value]

    def on_hci_le_set_advertising_set_random_address_command(self, command):
        if command.advertising_handle > 0xEF:
            return status(INVALID_PARAMETERS)
        self._advertising_set(command.advertising_handle).random_address = command.random_address
        return status(SUCCESS)

    def on_hci_le_set_extended_advertising_parameters_command(self, command):
        handle = command.advertising_handle
        existing = self.advertising_sets.get(handle)
        if existing is not None and existing.enabled:
            return hci.HCI_LE_Set_Extended_Advertising_Parameters_ReturnParameters(
                status=hci.HCI_ErrorCode(COMMAND_DISALLOWED), selected_tx_power=0
            )
        properties = int(command.advertising_event_properties)
        high_duty = properties & 0x08
        if (
            handle > 0xEF
            or command.own_address_type > 0x03
            or not (1 <= int(command.primary_advertising_channel_map) <= 7)
            or (
                not high_duty
                and (
                    not (0x20 <= command.primary_advertising_interval_min <= 0xFFFFFF)
                    or command.primary_advertising_interval_min
                    > command.primary_advertising_interval_max
                )
            )
            or (properties & 0x10 and properties & 0x0F not in (0x00, 0x02, 0x03, 0x05, 0x0D))
        ):
            return hci.HCI_LE_Set_Extended_Advertising_Parameters_ReturnParameters(
                status=hci.HCI_ErrorCode(INVALID_PARAMETERS), selected_tx_power=0
            )
        self._advertising_set(handle).parameters = command
        return hci.HCI_LE_Set_Extended_Advertising_Parameters_ReturnParameters(
            status=hci.HCI_ErrorCode.SUCCESS, selected_tx_power=0
        )

    def on_hci_le_set_extended_advertising_data_command(self, command):
        adv_set = self.advertising_sets.get(command.advertising_handle)
        if adv_set is None:
            return status(UNKNOWN_ADVERTISING_IDENTIFIER)
        if (
            adv_set.parameters is not None
            and int(adv_set.parameters.advertising_event_properties) & 0x10
            and (command.operation != 0x03 or len(command.advertising_data) > 31)
        ):
            return status(INVALID_PARAMETERS)
        return super().on_hci_le_set_extended_advertising_data_command(command)

    def on_hci_le_set_extended_advertising_enable_command(self, command):
        if command.enable:
            for handle in command.advertising_handles:
                adv_set = self.advertising_sets.get(handle)
                if adv_set is None:
                    return status(UNKNOWN_ADVERTISING_IDENTIFIER)
                if adv_set.parameters is None or adv_set.address is None:
                    return status(INVALID_PARAMETERS)
        return super().on_hci_le_set_extended_advertising_enable_command(command)

    # PATCH(7/8/9): scanning parameters, duplicates and validation.
    def on_hci_le_set_scan_parameters_command(self, command):
        if self.le_scan_enable:
            return status(COMMAND_DISALLOWED)
        if (
            command.le_scan_type > 1
            or not (0x0004 <= command.le_scan_interval <= 0x4000)
            or not (0x0004 <= command.le_scan_window <= 0x4000)
            or command.le_scan_window > command.le_scan_interval
            or command.own_address_type > 3
            or command.scanning_filter_policy > 3
        ):
            return status(INVALID_PARAMETERS)
        return super().on_hci_le_set_scan_parameters_command(command)

    def on_hci_le_set_scan_enable_command(self, command):
        if command.le_scan_enable > 1 or command.filter_duplicates > 1:
            return status(INVALID_PARAMETERS)
        self._set_scanning(bool(command.le_scan_enable), bool(command.filter_duplicates), 'legacy')
        return status(SUCCESS)

    def on_hci_le_set_extended_scan_parameters_command(self, command):
        if self.le_scan_enable:
            return status(COMMAND_DISALLOWED)
        if command.scanning_phys == 0 or not command.scan_intervals:
            return status(INVALID_PARAMETERS)
        for interval, window in zip(command.scan_intervals, command.scan_windows):
            if not (0x0004 <= interval) or not (0x0004 <= window <= interval):
                return status(INVALID_PARAMETERS)
        self.ext_scan_type = command.scan_types[0]
        self.ext_scan_interval = command.scan_intervals[0]
        self.ext_scan_window = command.scan_windows[0]
        return super().on_hci_le_set_extended_scan_parameters_command(command)

    def on_hci_le_set_extended_scan_enable_command(self, command):
        if command.enable > 1 or command.filter_duplicates > 2:
            return status(INVALID_PARAMETERS)
        self._set_scanning(bool(command.enable), bool(command.filter_duplicates), 'extended')
        return status(SUCCESS)

    def _set_scanning(self, enable: bool, filter_duplicates: bool, mode: str) -> None:
        if enable and not self.le_scan_enable:
            self.scan_started_at = time.monotonic()
            self.duplicates_seen.clear()
        self.le_scan_enable = enable
        self.filter_duplicates = filter_duplicates
        self.scan_mode = mode if enable else None

    def in_scan_window(self) -> bool:
        if self.scan_mode == 'extended':
            interval, window = self.ext_scan_interval, self.ext_scan_window
        else:
            interval, window = self.le_scan_interval, self.le_scan_window
        if window >= interval:
            return True
        phase = (time.monotonic() - self.scan_started_at) % (interval * 0.000625)
        return phase < window * 0.000625

    # PATCH(1/3/4): receive every PDU type, report it the way the scan asks.
    def on_ll_advertising_pdu(self, packet: ll.AdvertisingPdu) -> None:
        if isinstance(packet, ll.ConnectInd):
            self.on_le_connect_ind(packet)
        elif isinstance(packet, (ll.AdvInd, ll.AdvNonConnInd, AdvScanInd, ll.AdvDirectInd, ll.AdvExtInd)):
            self.receive_advertising_pdu(packet)

    def receive_advertising_pdu(self, pdu: Any) -> None:
        connectable = isinstance(pdu, (ll.AdvInd, ll.AdvDirectInd)) or (
            isinstance(pdu, ll.AdvExtInd) and getattr(pdu, 'properties', 0) & 1
        )
        pending = self.pending_le_connection
        if connectable and pending is not None and pending.peer_address == pdu.advertiser_address:
            self.create_le_connection(pdu.advertiser_address)

        if not self.le_scan_enable or not self.in_scan_window():
            return
        legacy_type = legacy_report_type(pdu)
        if legacy_type is None and self.scan_mode == 'legacy':
            return  # a legacy scanner cannot receive extended PDUs
        data = bytes(getattr(pdu, 'data', b'') or b'')
        address: hci.Address = pdu.advertiser_address
        if self.filter_duplicates:
            key = (bytes(address), address.address_type, legacy_type, data)
            if key in self.duplicates_seen:
                return
            self.duplicates_seen.add(key)
        rssi = self.rssi_model.sample(str(address))
        if self.scan_mode == 'legacy':
            report = hci.HCI_LE_Advertising_Report_Event.Report(
                event_type=legacy_type,
                address_type=address.address_type,
                address=address,
                data=data,
                rssi=rssi,
            )
            self.send_hci_packet(hci.HCI_LE_Advertising_Report_Event([report]))
        else:
            if len(data) > 229:
                # One report only: mark it truncated (data status 0b10, 7.7.65.13).
                data = data[:229]
                extra_status = 0x40
            else:
                extra_status = 0
            if legacy_type is not None:
                event_type = LEGACY_TO_EXTENDED_TYPE[legacy_type]
                secondary_phy, sid = 0, 0xFF
            else:
                event_type = (getattr(pdu, 'properties', 0) & 0x07) | extra_status
                secondary_phy, sid = hci.Phy.LE_1M, pdu.sid
            ext_report = hci.HCI_LE_Extended_Advertising_Report_Event.Report(
                event_type=event_type,
                address_type=address.address_type,
                address=address,
                primary_phy=hci.Phy.LE_1M,
                secondary_phy=secondary_phy,
                advertising_sid=sid,
                tx_power=0x7F,
                rssi=rssi,
                periodic_advertising_interval=0,
                direct_address_type=0,
                direct_address=hci.Address.ANY,
                data=data,
            )
            self.send_hci_packet(hci.HCI_LE_Extended_Advertising_Report_Event([ext_report]))


# -----------------------------------------------------------------------------
# DUT: fault injection, tracing, H4 transport
# -----------------------------------------------------------------------------
@dataclasses.dataclass
class Fault:
    kind: str  # 'status' | 'none' | 'late'
    value: int = 0


def parse_fault(spec: str) -> tuple[int, Fault]:
    opcode_text, _, action = spec.partition('=')
    opcode = int(opcode_text, 0)
    action = action.strip().lower()
    if action == 'none':
        return opcode, Fault('none')
    if action.startswith('late:'):
        return opcode, Fault('late', int(action[5:]))
    return opcode, Fault('status', int(action, 0))


JUNK = bytes([0xFF, 0xFE, 0x00, 0x42, 0x13, 0x37, 0xA5, 0x5A])


class DutController(HarnessController):
    def __init__(self, *args: Any, faults: dict[int, Fault], slow_ms: int,
                 garbage_after: int | None, trace: bool, **kwargs: Any) -> None:
        self.faults = faults
        self.slow_ms = slow_ms
        self.garbage_after = garbage_after
        self.trace = trace
        self.credits: int | None = None
        self.command_count = 0
        self.collecting: list[bytes] | None = None
        self.transport: H4Endpoint | None = None
        super().__init__(*args, **kwargs)

    # Host -> controller (raw H4 packet from the transport).
    def on_packet(self, packet: bytes) -> None:
        if self.trace:
            self._trace_in(packet)
        if not packet or packet[0] != hci.HCI_COMMAND_PACKET or len(packet) < 4:
            super().on_packet(packet)
            return
        self.command_count += 1
        op_code = packet[1] | packet[2] << 8
        fault = self.faults.get(op_code)
        delay = self.slow_ms / 1000.0
        self.collecting = []
        try:
            if fault is not None and fault.kind == 'none':
                logger.info('fault: dropping command 0x%04X', op_code)
            elif fault is not None and fault.kind == 'status':
                self.answer_status(op_code, fault.value)
            else:
                if fault is not None and fault.kind == 'late':
                    delay += fault.value / 1000.0
                super().on_packet(packet)
        finally:
            answers, self.collecting = self.collecting, None
        if self.garbage_after is not None and self.command_count == self.garbage_after:
            answers.append(JUNK)
        if not answers:
            return
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._deliver_all, answers, self.transport)
        else:
            asyncio.get_running_loop().call_soon(self._deliver_all, answers, self.transport)

    def send_hci_packet(self, packet: hci.HCI_Packet) -> None:
        raw = bytes(packet)
        if self.collecting is not None and raw[0] == hci.HCI_EVENT_PACKET and raw[1] in (
            hci.HCI_COMMAND_COMPLETE_EVENT,
            hci.HCI_COMMAND_STATUS_EVENT,
        ):
            self.collecting.append(raw)
            return
        self.deliver_raw(raw)

    def deliver_raw(self, raw: bytes) -> None:
        """Send an event to the host now (subject to the event masks)."""
        if not self.event_allowed(raw):
            return
        asyncio.get_running_loop().call_soon(self._deliver_all, [raw], self.transport)

    def _deliver_all(self, packets: list[bytes], transport: 'H4Endpoint | None') -> None:
        if transport is None or transport is not self.transport or not transport.connected:
            return  # the client that asked has gone
        for raw in packets:
            if raw is not JUNK and not self.event_allowed(raw):
                continue
            if self.credits is not None and raw is not JUNK and len(raw) >= 4 and raw[0] == hci.HCI_EVENT_PACKET:
                # Num_HCI_Command_Packets: byte 3 of Command Complete, byte 4 of Command Status.
                if raw[1] == hci.HCI_COMMAND_COMPLETE_EVENT:
                    raw = raw[:3] + bytes([self.credits]) + raw[4:]
                elif raw[1] == hci.HCI_COMMAND_STATUS_EVENT and len(raw) >= 5:
                    raw = raw[:4] + bytes([self.credits]) + raw[5:]
            if self.trace:
                self._trace_out(raw)
            transport.write(raw)

    def _trace_in(self, packet: bytes) -> None:
        record: dict[str, Any] = {'event': 'hci', 'dir': 'in', 't': time.monotonic()}
        if packet and packet[0] == hci.HCI_COMMAND_PACKET and len(packet) >= 4:
            record.update(type='cmd', opcode=f'0x{packet[1] | packet[2] << 8:04X}', data=packet[4:].hex())
        else:
            record.update(type='other', raw=packet.hex())
        emit(record)

    def _trace_out(self, raw: bytes) -> None:
        record: dict[str, Any] = {'event': 'hci', 'dir': 'out', 't': time.monotonic()}
        if raw is JUNK:
            record.update(type='junk', raw=raw.hex())
        elif raw[0] == hci.HCI_EVENT_PACKET and len(raw) >= 3:
            code = raw[1]
            record.update(type='evt', code=f'0x{code:02X}', data=raw[3:].hex())
            if code == hci.HCI_COMMAND_COMPLETE_EVENT and len(raw) >= 6:
                record.update(opcode=f'0x{raw[4] | raw[5] << 8:04X}')
                if len(raw) >= 7:
                    record.update(status=raw[6])
            elif code == hci.HCI_COMMAND_STATUS_EVENT and len(raw) >= 7:
                record.update(opcode=f'0x{raw[5] | raw[6] << 8:04X}', status=raw[3])
            elif code == hci.HCI_LE_META_EVENT and len(raw) >= 4:
                record.update(subevent=f'0x{raw[3]:02X}')
        else:
            record.update(type='other', raw=raw.hex())
        emit(record)

    # Unsolicited events for the control commands (raw bytes, Vol 4 Part E 7.7.14/7.7.16).
    def control_reset(self) -> None:
        self.reset_state()
        self.deliver_raw(bytes([0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]))

    def control_powercycle(self) -> None:
        self.reset_state()
        self.deliver_raw(bytes([0x04, 0x0E, 0x03, 0x01, 0x00, 0x00]))

    def control_hwerror(self) -> None:
        self.deliver_raw(bytes([0x04, 0x10, 0x01, 0x01]))
        self.reset_state()

    def control_nop0(self) -> None:
        self.deliver_raw(bytes([0x04, 0x0E, 0x03, 0x00, 0x00, 0x00]))

    # Hostile floods (issue 11): as fast as the host reads them.
    FLOOD_EVENTS = {
        # LE Meta, LE Advertising Report: 1 report, ADV_NONCONN_IND, random address, 3 bytes of
        # data (flags), RSSI -60.
        'report': bytes([0x04, 0x3E, 0x0F, 0x02, 0x01, 0x03, 0x01, 0x11, 0x22, 0x33, 0x44, 0x55, 0xC6,
                         0x03, 0x02, 0x01, 0x06, 0xC4]),
        # LE Meta, LE Advertising Report claiming 9 reports in 2 bytes.
        'malformed': bytes([0x04, 0x3E, 0x02, 0x02, 0x09]),
        'hwerror': bytes([0x04, 0x10, 0x01, 0x01]),
        # LE Meta, LE Advertising Report: 1 report, ADV_NONCONN_IND, random address, the test
        # iBeacon (E2C56DB5-DFFB-48D2-B060-D0F5A71096E0, major 258, minor 772, power -59), RSSI
        # -60 here; `flood` varies it -50…-70 over each batch (what calibrate keeps, issue 23).
        'ibeacon': bytes([0x04, 0x3E, 0x2A, 0x02, 0x01, 0x03, 0x01, 0x11, 0x22, 0x33, 0x44, 0x55, 0xC6, 0x1E,
                          0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15])
        + bytes.fromhex('E2C56DB5DFFB48D2B060D0F5A71096E0') + bytes([0x01, 0x02, 0x03, 0x04, 0xC5, 0xC4]),
    }

    async def flood(self, kind: str, seconds: float, limit: int | None = None) -> dict[str, Any]:
        raw = self.FLOOD_EVENTS[kind]
        batch = raw * 512
        if kind == 'ibeacon':
            batch = b''.join(raw[:-1] + bytes([(-50 - k % 21) & 0xFF]) for k in range(512))
        if kind == 'hwerror':
            self.reset_state()
        sent = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and (limit is None or sent < limit):
            endpoint = self.transport
            if endpoint is None or not endpoint.connected:
                await asyncio.sleep(0.01)
                continue
            if endpoint.write_buffer_size() > 1 << 16:
                await asyncio.sleep(0.001)  # the host is not reading faster: keep 64 KiB queued
                continue
            endpoint.write(batch)
            sent += 512
            await asyncio.sleep(0)
        return {'event': 'flood', 'kind': kind, 'events': sent, 'bytes': sent * len(raw)}

    def control_foreign_stop(self) -> None:
        enabled_sets = [a for a in self.advertising_sets.values() if a.enabled]
        if enabled_sets:
            for advertising_set in enabled_sets:
                advertising_set.stop()
            self.deliver_raw(bytes([0x04, 0x0E, 0x04, 0x01, 0x39, 0x20, 0x00]))
        else:
            self.le_legacy_advertiser.stop()
            self.deliver_raw(bytes([0x04, 0x0E, 0x04, 0x01, 0x0A, 0x20, 0x00]))


class H4Endpoint:
    """One connected client (TCP connection or pty session)."""

    connected = True

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def write_buffer_size(self) -> int:
        """Bytes written but not yet taken by the OS (flow control for floods)."""
        return 0


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
