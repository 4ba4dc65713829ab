"""`--mqtt` against a real broker: Debian's mosquitto on a free loopback port (mqtt_broker.py),
read with mosquitto_sub. Region states, events, beacon status, availability and the Last Will,
Home Assistant discovery, TLS with a CA made here, password files, a broker killed and started
again, a broker absent at start, and ranging for mqtt_room.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from mqtt_broker import Broker, free_port
from support import BEACON_UUID, MAJOR, MINOR, run, start_advertising, wait_until, write_profile
from test_monitor import Monitor

BEACON = f'{BEACON_UUID},{MAJOR},{MINOR},-59,100,D0:00:00:00:00:01'
BAKERY = f'bakery={BEACON_UUID}:{MAJOR}:{MINOR}'
BASE = 'test/box'

# Home Assistant's documented MQTT discovery fields for a binary_sensor (FIELD.md "MQTT, Home
# Assistant and the fleet", from Home Assistant's MQTT discovery and MQTT binary sensor pages):
# the independent judge of what ibeacon publishes. `state_topic` is required; `unique_id` with a
# `device` carrying `identifiers` groups the entities under one device; payloads default to
# ON/OFF; availability uses online/offline.
HA_BINARY_SENSOR_REQUIRED = {'state_topic'}
HA_BINARY_SENSOR_ALLOWED = {
    'availability', 'availability_mode', 'availability_template', 'availability_topic', 'device',
    'device_class', 'enabled_by_default', 'encoding', 'entity_category', 'entity_picture', 'expire_after',
    'force_update', 'icon', 'json_attributes_template', 'json_attributes_topic', 'name', 'object_id',
    'off_delay', 'payload_available', 'payload_not_available', 'payload_off', 'payload_on', 'platform',
    'qos', 'state_topic', 'unique_id', 'value_template', 'default_entity_id', 'origin',
}
HA_DEVICE_ALLOWED = {
    'configuration_url', 'connections', 'hw_version', 'identifiers', 'manufacturer', 'model', 'model_id',
    'name', 'serial_number', 'suggested_area', 'sw_version', 'via_device',
}
HA_DEVICE_CLASSES = {'presence', 'running', 'occupancy', 'connectivity', 'problem'}


def check_discovery(topic: str, payload: str, prefix: str = 'homeassistant') -> dict:
    """The discovery message against Home Assistant's documented fields."""
    parts = topic.split('/')
    assert parts[0] == prefix and parts[1] == 'binary_sensor' and parts[-1] == 'config', topic
    assert len(parts) in (4, 5), topic
    for part in parts[2:-1]:  # node_id and object_id: [a-zA-Z0-9_-]
        assert part and all(c.isalnum() and c.isascii() or c in '_-' for c in part), topic
    config = json.loads(payload)
    assert HA_BINARY_SENSOR_REQUIRED <= set(config), config
    assert set(config) <= HA_BINARY_SENSOR_ALLOWED, set(config) - HA_BINARY_SENSOR_ALLOWED
    assert config['unique_id'] and isinstance(config['unique_id'], str)
    assert set(config['device']) <= HA_DEVICE_ALLOWED and config['device']['identifiers'], config['device']
    assert config.get('device_class') in HA_DEVICE_CLASSES
    assert '+' not in config['state_topic'] and '#' not in config['state_topic']
    assert config.get('payload_on', 'ON') == 'ON' and config.get('payload_off', 'OFF') == 'OFF'
    assert config.get('payload_available', 'online') == 'online'
    assert config.get('payload_not_available', 'offline') == 'offline'
    assert 'availability_topic' in config or 'availability' in config
    return config


def mqtt_args(broker: Broker, *extra: str) -> list[str]:
    return ['--mqtt', broker.url, '--mqtt-base', BASE, *extra]


def test_monitor_publishes_region_states_events_and_discovery(ibeacon_bin: Path, harness_factory,
                                                             tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    try:
        h = harness_factory('--beacon', BEACON, '--scanner', '--rssi', 'constant:-61')
        h.send('beacon-off 0')
        with broker.subscribe('#') as sub:
            m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--region', 'a/b+c#=' + BEACON_UUID,
                        '--exit-after', '2', *mqtt_args(broker))
            try:
                state = f'{BASE}/region/bakery/state'
                # Unknown until determined, then outside after --exit-after.
                assert wait_until(lambda: sub.on(state)[:2] == ['None', 'OFF'], 10), (sub.all(), m.stderr)
                h.send('beacon-on 0')
                m.wait_for('enter', 'bakery', timeout=5)
                assert wait_until(lambda: sub.on(state)[-1:] == ['ON'], 3), sub.all()
                # The unsafe name is one safe level.
                assert wait_until(lambda: sub.on(f'{BASE}/region/a_b_c_/state')[-1:] == ['ON'], 3), sub.all()
                # Every event, exactly as --json prints it, not retained.
                assert wait_until(lambda: len(sub.on(f'{BASE}/event')) == len(m.events), 3)
                printed = [{k: v for k, v in e.items() if k != 'arrived'} for e in m.events]
                assert [json.loads(p) for p in sub.on(f'{BASE}/event')] == printed
                assert all(not r for r, t, _, _ in sub.all() if t == f'{BASE}/event')
                store = broker.retained()
            finally:
                rc = m.stop(signal.SIGTERM)
        assert rc == 0, m.stderr
        assert store[f'{BASE}/monitor/availability'] == 'online'
        assert store[state] == 'ON'
        attributes = json.loads(store[f'{BASE}/region/bakery/attributes'])
        assert attributes['state'] == 'inside' and attributes['region'] == 'bakery'
        assert attributes['reason'].startswith('heard ') and attributes['time'].endswith('Z')
        configs = {t: check_discovery(t, p) for t, p in store.items() if t.startswith('homeassistant/')}
        assert len(configs) == 2, store
        bakery = next(c for c in configs.values() if c['state_topic'] == state)
        assert bakery['device_class'] == 'presence'
        assert bakery['availability_topic'] == f'{BASE}/monitor/availability'
        assert bakery['json_attributes_topic'] == f'{BASE}/region/bakery/attributes'
        assert len({c['unique_id'] for c in configs.values()}) == 2
        assert len({json.dumps(c['device'], sort_keys=True) for c in configs.values()}) == 1
        # A clean exit says offline (retained), and leaves the last states.
        after = broker.retained()
        assert after[f'{BASE}/monitor/availability'] == 'offline'
        assert after[state] == 'ON'
    finally:
        broker.close()
