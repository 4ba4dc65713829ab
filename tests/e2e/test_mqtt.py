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
                # Available only once every region is determined, after their states.
                online_seen = lambda: (f'{BASE}/monitor/availability', 'online') in [(t, p) for _, t, p, _ in sub.all()]  # noqa: E731
                assert wait_until(online_seen, 3), sub.all()
                live = [(t, p) for _, t, p, _ in sub.all()]
                online = live.index((f'{BASE}/monitor/availability', 'online'))
                assert (state, 'OFF') in live[:online] and (f'{BASE}/region/a_b_c_/state', 'OFF') in live[:online], live
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
        # A broker that never went away: no warning at all, also not on the way out.
        assert 'warning' not in m.stderr and 'retrying' not in m.stderr, m.stderr
        assert store[f'{BASE}/monitor/availability'] == 'online'
        assert store[state] == 'ON'
        attributes = json.loads(store[f'{BASE}/region/bakery/attributes'])
        # `presence`, not `state`: Home Assistant drops a `state` key from attributes.
        assert attributes['presence'] == 'inside' and attributes['region'] == 'bakery'
        assert attributes['reason'].startswith('heard ') and attributes['time'].endswith('Z')
        configs = {t: check_discovery(t, p) for t, p in store.items() if t.startswith('homeassistant/binary_sensor/')}
        assert len(configs) == 2, store
        # The receiver's health: two diagnostic sensors of the same device, read from one topic.
        health = {t: json.loads(p) for t, p in store.items() if t.startswith('homeassistant/sensor/')}
        assert sorted(t.rsplit('/', 2)[1] for t in health) == ['monitor_receiver', 'monitor_reports'], store
        assert all(c['entity_category'] == 'diagnostic' and c['state_topic'] == f'{BASE}/monitor/health'
                   for c in health.values()), health
        assert json.loads(store[f'{BASE}/monitor/health'])['receiver'] == 'hearing'
        # State and attributes from one message: each change is one change in Home Assistant.
        bakery = next(c for c in configs.values() if c['state_topic'] == f'{BASE}/region/bakery/attributes')
        assert bakery['device_class'] == 'presence'
        assert bakery['availability_topic'] == f'{BASE}/monitor/availability'
        assert bakery['json_attributes_topic'] == bakery['state_topic'] and 'presence' in bakery['value_template']
        assert bakery['origin']['name'] == 'ibeacon' and bakery['device']['sw_version'] == bakery['origin']['sw_version']
        assert len({c['unique_id'] for c in configs.values()}) == 2
        assert len({json.dumps(c['device'], sort_keys=True) for c in configs.values()}) == 1
        # A clean exit says offline (retained), and leaves the last states.
        after = broker.retained()
        assert after[f'{BASE}/monitor/availability'] == 'offline'
        assert after[state] == 'ON'
    finally:
        broker.close()


def test_home_assistant_restart_gets_discovery_and_states_again(ibeacon_bin: Path, harness_factory,
                                                                tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    try:
        h = harness_factory('--beacon', BEACON, '--scanner')
        m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, *mqtt_args(broker))
        try:
            m.wait_for('inside', 'bakery', timeout=8)
            assert wait_until(lambda: broker.retained().get(f'{BASE}/region/bakery/state') == 'ON', 5)
            with broker.subscribe('#') as sub:
                assert wait_until(lambda: len(sub.all()) >= 4, 3)  # the retained store, delivered at once
                seen = len(sub.all())
                broker.publish('homeassistant/status', 'online')
                live = lambda: [(t, p) for r, t, p, _ in sub.all()[seen:] if not r]  # noqa: E731
                assert wait_until(lambda: any(t.startswith('homeassistant/binary_sensor/') for t, _ in live()), 5)
                assert wait_until(lambda: (f'{BASE}/region/bakery/state', 'ON') in live(), 3), live()
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
        assert 'Home Assistant restarted' in m.stderr
    finally:
        broker.close()


def test_broker_killed_and_restarted_gets_the_current_picture_back(ibeacon_bin: Path, harness_factory,
                                                                   tmp_path: Path) -> None:
    """The broker dies (SIGKILL, no persistence) while a region is inside; the beacon goes away
    while the broker is down. Monitoring goes on, exit on time; once the broker is back the
    retained store holds the *current* picture: the region outside, discovery, online."""
    broker = Broker(tmp_path)
    try:
        h = harness_factory('--beacon', BEACON, '--scanner')
        m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--exit-after', '2',
                    *mqtt_args(broker))
        try:
            m.wait_for('inside', 'bakery', timeout=8)
            assert wait_until(lambda: broker.retained().get(f'{BASE}/region/bakery/state') == 'ON', 5)
            before = broker.retained()
            broker.kill()
            h.send('beacon-off 0')
            last = h.adv_events(address='D0:00:00:00:00:01')[-1]['t']
            exit_ = m.wait_for('exit', 'bakery', timeout=6)
            assert exit_['arrived'] - last <= 2.0 + 2.0  # the broker's absence held nothing up
            time.sleep(3)  # several reconnect attempts
            broker.start()
            expected = dict(before)
            expected[f'{BASE}/region/bakery/state'] = 'OFF'
            assert wait_until(lambda: (s := broker.retained()).get(f'{BASE}/region/bakery/state') == 'OFF'
                              and set(s) == set(expected), 10), (broker.retained(), m.stderr)
            after = broker.retained()
            steady = lambda store: {t: p for t, p in store.items()  # noqa: E731
                                    if not t.endswith('/attributes') and not t.endswith('/health')}
            assert steady(after) == steady(expected)
            assert json.loads(after[f'{BASE}/region/bakery/attributes'])['presence'] == 'outside'
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
        # One line for the outage and one when it is back, not one per attempt.
        lost = [line for line in m.stderr.splitlines() if 'retrying in the background' in line]
        back = [line for line in m.stderr.splitlines() if 'is back after' in line]
        assert len(lost) == 1 and len(back) == 1, m.stderr
    finally:
        broker.close()


def test_broker_unreachable_at_start_holds_nothing_up(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    broker = Broker(tmp_path, start=False)
    try:
        h = harness_factory('--beacon', BEACON, '--scanner')
        h.send('beacon-off 0')
        m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--exit-after', '1',
                    *mqtt_args(broker))
        try:
            outside = m.wait_for('outside', 'bakery', timeout=6)
            assert 0.9 <= outside['t'] <= 1.6, outside  # as without a broker
            broker.start()
            assert wait_until(lambda: broker.retained().get(f'{BASE}/region/bakery/state') == 'OFF', 10), m.stderr
            assert broker.retained()[f'{BASE}/monitor/availability'] == 'online'
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
        assert 'Connection refused' in m.stderr and 'is back after' in m.stderr, m.stderr
    finally:
        broker.close()


def test_tls_with_a_test_ca_and_a_password_file(ibeacon_bin: Path, harness_factory, tmp_path: Path,
                                                monkeypatch) -> None:
    broker = Broker(tmp_path, tls=True, users={'box': 's3cret pass'})
    try:
        assert broker.tls is not None
        password = tmp_path / 'mqtt.password'
        password.write_text('s3cret pass\n')
        h = harness_factory('--beacon', BEACON, '--scanner')
        tls = ['--mqtt-ca', str(broker.tls['ca']), '--mqtt-user', 'box']
        m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, *mqtt_args(broker, *tls),
                    '--mqtt-password-file', str(password))
        try:
            m.wait_for('inside', 'bakery', timeout=8)
            assert wait_until(lambda: broker.retained().get(f'{BASE}/region/bakery/state') == 'ON', 8), m.stderr
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
        assert broker.retained()[f'{BASE}/monitor/availability'] == 'offline'
        # A wrong password (from the environment): refused, said once, and monitoring goes on.
        monkeypatch.setenv('IBEACON_MQTT_PASSWORD', 'wrong')
        h2 = harness_factory('--beacon', BEACON, '--scanner')
        m2 = Monitor(ibeacon_bin, '--device', h2.device_spec, '--region', BAKERY,
                     *mqtt_args(broker, *tls, '--mqtt-base', 'test/other'))
        try:
            m2.wait_for('inside', 'bakery', timeout=8)
            assert wait_until(lambda: 'refused the connection' in m2.stderr, 5), m2.stderr
        finally:
            assert m2.stop(signal.SIGTERM) == 0, m2.stderr
        assert 'test/other/region/bakery/state' not in broker.retained()
    finally:
        broker.close()


def test_sigkill_leaves_the_last_will_offline(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    try:
        profile = write_profile(tmp_path / 'front-door.json', name='front-door')
        adv_harness = harness_factory('--scanner')
        advertise = start_advertising(ibeacon_bin, adv_harness, profile, *mqtt_args(broker))
        h = harness_factory('--beacon', BEACON, '--scanner')
        m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, *mqtt_args(broker))
        try:
            m.wait_for('inside', 'bakery', timeout=8)
            ready = lambda: broker.retained()  # noqa: E731
            assert wait_until(lambda: ready().get(f'{BASE}/advertise/availability') == 'online'
                              and ready().get(f'{BASE}/monitor/availability') == 'online', 5), ready()
            store = broker.retained()
            assert store[f'{BASE}/beacon/front-door/state'] == 'ON'
            status = json.loads(store[f'{BASE}/beacon/front-door/attributes'])
            assert (status['status'], status['uuid'], status['major'], status['minor'], status['measuredPower']) == \
                ('advertising', BEACON_UUID, MAJOR, MINOR, -59)
            assert status['intervalMs'] == 100 and status['lastRecovery'] is None
            # The address a consumer keys on: the one the peer scanner hears.
            assert status['address'].upper() == adv_harness.adv_events()[-1]['address'].upper(), status
            beacon_config = check_discovery(
                next(t for t in store if t.startswith('homeassistant/') and 'beacon_front-door' in t),
                next(p for t, p in store.items() if t.startswith('homeassistant/') and 'beacon_front-door' in t))
            assert beacon_config['device_class'] == 'running'
            # The controller resets: recovering, then advertising again with the cause.
            adv_harness.send('reset')
            assert wait_until(lambda: json.loads(broker.retained()[f'{BASE}/beacon/front-door/attributes'])
                              .get('lastRecoveryCause') is not None, 8)
            assert wait_until(lambda: broker.retained()[f'{BASE}/beacon/front-door/state'] == 'ON', 8)
        finally:
            advertise.send_signal(signal.SIGKILL)
            m.proc.send_signal(signal.SIGKILL)
            advertise.wait(timeout=5)
            m.stop()
        assert wait_until(lambda: broker.retained().get(f'{BASE}/advertise/availability') == 'offline'
                          and broker.retained().get(f'{BASE}/monitor/availability') == 'offline', 5), broker.retained()
    finally:
        broker.close()


def test_scan_publishes_ranging_for_mqtt_room(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    try:
        h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-65')
        with broker.subscribe('room_presence/#') as sub:
            time.sleep(0.3)
            result = run(ibeacon_bin, 'scan', '--device', h.device_spec, '--duration', '4',
                         *mqtt_args(broker, '--mqtt-room', 'kitchen/1'))
            assert result.returncode == 0, result.stderr
            assert wait_until(lambda: sub.on('room_presence/kitchen_1'), 3), sub.all()
            readings = [json.loads(p) for p in sub.on('room_presence/kitchen_1')]
        assert all(list(r) == ['id', 'name', 'distance'] for r in readings), readings
        ident = f'{BEACON_UUID.lower()}-{MAJOR}-{MINOR}'
        assert {r['id'] for r in readings} == {ident}
        # -65 dBm against -59 at 1 m: 10^(6/20) = 2.0 m; at most one a second over a 4 s scan.
        assert all(abs(r['distance'] - 2.0) < 0.05 for r in readings), readings
        assert 1 <= len(readings) <= 5, readings
        assert broker.retained()[f'{BASE}/scan/availability'] == 'offline'
    finally:
        broker.close()


@pytest.mark.parametrize('args, words', [
    (['--mqtt', 'mqtt://box:secret@127.0.0.1'], ['password in the URL is refused', '--mqtt-password-file',
                                                  'IBEACON_MQTT_PASSWORD']),
    (['--mqtt', 'http://127.0.0.1'], ['scheme must be mqtt or mqtts']),
    (['--mqtt', 'mqtt://127.0.0.1:70000'], ['port must be a number within 1…65535']),
    (['--mqtt', 'mqtt://'], ['no host']),
    (['--mqtt', 'mqtt://127.0.0.1/topic'], ['--mqtt-base']),
    (['--mqtt', 'mqtt://127.0.0.1', '--mqtt-ca', '/etc/hostname'], ['use an mqtts:// URL']),
    (['--mqtt', 'mqtt://127.0.0.1', '--mqtt-base', 'a/#'], ['wildcards']),
    (['--mqtt-base', 'a/b'], ['needs --mqtt URL']),
])
@pytest.mark.parametrize('command', [['monitor', '--region', BAKERY], ['scan'], ['advertise', '--profile', 'x.json']])
def test_unusable_mqtt_settings_are_usage_errors(ibeacon_bin: Path, command, args, words) -> None:
    result = run(ibeacon_bin, *command, '--device', 'tcp:127.0.0.1:9', *args)
    assert result.returncode == 64, result.stderr
    for w in words:
        assert w in result.stderr, result.stderr


def test_missing_password_file_is_66_before_anything_starts(ibeacon_bin: Path, tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as listener:  # a "broker" nobody answers on: it must not matter
        listener.bind(('127.0.0.1', port))
        result = run(ibeacon_bin, 'scan', '--device', 'tcp:127.0.0.1:9', '--mqtt', f'mqtt://127.0.0.1:{port}',
                     '--mqtt-password-file', str(tmp_path / 'absent'))
    assert result.returncode == 66, result.stderr
    assert 'absent' in result.stderr
    _ = subprocess
