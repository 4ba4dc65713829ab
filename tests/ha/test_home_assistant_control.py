"""Steering a beacon from a real Home Assistant (issue 42): `advertise --mqtt-control` makes each
beacon a switch and numbers in Home Assistant; `number.set_value` and `switch.turn_off/on`
through Home Assistant's REST API must change what an independent scanner (the Bumble
harness's) hears, the profile on disk, and the state Home Assistant shows; a refused value
leaves all three unchanged; two boxes, each with a beacon named `door`, keep their own.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from home_assistant import HomeAssistant
from mqtt_broker import Broker
from support import BEACON_UUID, MAJOR, MINOR, start_advertising, stop_process, wait_until


def write_door(path: Path, measured_power: int = -65) -> Path:
    path.write_text(json.dumps({'name': 'door', 'uuid': BEACON_UUID, 'major': MAJOR, 'minor': MINOR,
                                'measuredPower': measured_power, 'intervalMs': 100}, indent=2) + '\n')
    return path


def call(ha: HomeAssistant, service: str, entity_id: str, **data) -> int:
    domain, name = service.split('.')
    status, _ = ha._request('POST', f'/api/services/{domain}/{name}', {'entity_id': entity_id, **data})
    return status


def find(ha: HomeAssistant, domain: str, *parts: str, timeout: float = 20) -> str:
    """The one entity of `domain` whose id holds every part."""
    def matching() -> list[str]:
        return [e for e in ha.entities() if e.startswith(domain + '.') and all(p in e for p in parts)]
    assert wait_until(lambda: len(matching()) == 1, timeout), (matching(), ha.entities(), ha.log_text()[-3000:])
    return matching()[0]


def heard_power(harness, since: float) -> set[int]:
    """The measured power the independent scanner heard in the iBeacon frames since `since`."""
    return {e['ibeacon']['power'] for e in harness.adv_events(since=since) if e.get('ibeacon')}


def hears_only(harness, power: int, timeout: float = 5) -> bool:
    """Within `timeout`, a 1.5 s window in which the scanner heard this beacon with `power` only."""
    def check() -> bool:
        t = time.monotonic()
        time.sleep(1.5)
        return heard_power(harness, t) == {power}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
    return False


def silent(harness, seconds: float = 1.5) -> bool:
    t = time.monotonic()
    time.sleep(seconds)
    return not heard_power(harness, t + 0.3)


def box(ibeacon_bin: Path, harness, profile: Path, broker: Broker, base: str):
    return start_advertising(ibeacon_bin, harness, profile, '--mqtt', broker.url, '--mqtt-base', base,
                             '--mqtt-control')


def test_home_assistant_steers_what_the_scanner_hears_and_the_profile_keeps(
        ibeacon_bin: Path, harness_factory, broker: Broker, home_assistant: HomeAssistant, tmp_path: Path) -> None:
    ha = home_assistant
    a = harness_factory('--scanner', '--address', '00:1A:7D:DA:71:13')
    b = harness_factory('--scanner', '--address', '00:1A:7D:DA:71:13')
    p12, p13 = write_door(tmp_path / 'store12-door.json'), write_door(tmp_path / 'store13-door.json')
    box12 = box(ibeacon_bin, a, p12, broker, 'chain/store12')
    box13 = box(ibeacon_bin, b, p13, broker, 'chain/store13')
    try:
        assert hears_only(a, -65) and hears_only(b, -65)
        power12 = find(ha, 'number', '164b5f65', 'measured_power')
        power13 = find(ha, 'number', '3dd98a86', 'measured_power')
        switch12 = find(ha, 'switch', '164b5f65')
        assert wait_until(lambda: float(ha.state(power12)['state']) == -65, 10), ha.state(power12)

        # A value through Home Assistant: on the air, on disk, and shown — for store 12 only.
        assert call(ha, 'number.set_value', power12, value=-62) == 200
        assert hears_only(a, -62), heard_power(a, time.monotonic() - 2)
        assert wait_until(lambda: json.loads(p12.read_text())['measuredPower'] == -62, 5), p12.read_text()
        assert wait_until(lambda: float(ha.state(power12)['state']) == -62, 5), ha.state(power12)
        assert hears_only(b, -65) and json.loads(p13.read_text())['measuredPower'] == -65
        assert float(ha.state(power13)['state']) == -65

        # Store 13 gets its own value; store 12 keeps its.
        assert call(ha, 'number.set_value', power13, value=-70) == 200
        assert hears_only(b, -70) and hears_only(a, -62)
        assert wait_until(lambda: json.loads(p13.read_text())['measuredPower'] == -70, 5)
        assert json.loads(p12.read_text())['measuredPower'] == -62

        # Refused values: out of the entity's range (Home Assistant refuses it), and malformed or
        # out of range straight on the command topic (the box refuses it). Nothing changes.
        before = p12.read_text()
        assert call(ha, 'number.set_value', power12, value=-300) != 200
        for payload in ('abc', '-300', '{"x":1}'):
            assert broker.publish('chain/store12/beacon/door/set/measured_power', payload).returncode == 0
        time.sleep(1.5)
        assert hears_only(a, -62) and p12.read_text() == before
        assert float(ha.state(power12)['state']) == -62

        # Off and on again through the switch.
        assert call(ha, 'switch.turn_off', switch12) == 200
        assert wait_until(lambda: ha.state(switch12)['state'] == 'off', 5), ha.state(switch12)
        assert silent(a) and hears_only(b, -70)
        assert json.loads(p12.read_text()).get('advertising') is False, p12.read_text()
        assert call(ha, 'switch.turn_on', switch12) == 200
        assert hears_only(a, -62)
        assert wait_until(lambda: ha.state(switch12)['state'] == 'on', 5), ha.state(switch12)
        assert json.loads(p12.read_text()).get('advertising', True) is True, p12.read_text()
    finally:
        for proc in (box12, box13):
            stop_process(proc, signal.SIGTERM)
