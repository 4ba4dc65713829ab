"""The emulated controllers of the Bumble harness (bumble_harness.py runs them): the controller
ibeacon talks to (DutController: HCI commands, advertising sets, injected faults), the one every
emulated device runs (HarnessController), RSSI models, the legacy/extended PDU mapping, and the
H4 endpoint a controller writes to."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import sys
import time
from typing import Any

from bumble import controller as bumble_controller
from bumble import hci, ll
from bumble.link import LocalLink

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
        # `mute`: every command is dropped unanswered (a controller that hangs) until `unmute`.
        self.muted = False
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
        if self.muted:
            logger.info('muted: dropping command 0x%04X', op_code)
            return
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
