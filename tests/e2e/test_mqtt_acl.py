"""Who may steer is the broker's decision: mosquitto run with the ACL of docs/examples/mosquitto-acl
(the one docs/SECURITY.md gives) and a password file made with mosquitto_passwd. A user the ACL
gives no write access, and a box writing to another box's command topics, deliver nothing; the
operator does; `calibrate --apply-to` run as a user without the right says the broker refused.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

from mqtt_broker import Broker
from support import BEACON_UUID, MAJOR, MINOR, fnv_digest, start_advertising, stop_process, wait_until
from test_calibrate_apply import BoxStandIn, applied, calibrate
from test_profile_store import BEACON, PROFILE_TEXT

ACL = Path(__file__).resolve().parents[2] / 'docs' / 'examples' / 'mosquitto-acl'
USERS = {'operator': 'op-secret', 'box-store12': 'pw12', 'box-store13': 'pw13', 'guest': 'guest-pw'}
CSR_CLONE = '00:1A:7D:DA:71:13'


def node(base: str, address: str = CSR_CLONE) -> str:
    """A box's node as its log says it: host name, adapter address, digest of the base."""
    host = ''.join(c if c.isascii() and (c.isalnum() or c in '-_') else '_' for c in socket.gethostname())
    return f"{host}_{address.replace(':', '').lower()}_{fnv_digest(base)}"


def acl_broker(tmp_path: Path) -> Broker:
    """mosquitto with the documented ACL (the NODE placeholders filled as a box's log would say)."""
    acl = tmp_path / 'acl'
    acl.write_text(ACL.read_text().replace('NODE-OF-STORE12', node('chain/store12'))
                   .replace('NODE-OF-STORE13', node('chain/store13')))
    return Broker(tmp_path, users=USERS, acl=acl)


def publish(broker: Broker, user: str, topic: str, payload: str) -> subprocess.CompletedProcess[str]:
    return broker.publish(topic, payload, user=user, mqtt5_qos1=True, check=False)


def test_only_the_operator_and_the_box_itself_reach_a_boxs_command_topics(tmp_path: Path) -> None:
    assert fnv_digest('chain/store12') == '164b5f65'  # the Swift tests pin the same value
    broker = acl_broker(tmp_path)
    try:
        # Store 12's box listens to its command topics, as advertise --mqtt-control does.
        with broker.subscribe('chain/store12/beacon/+/set/+', user='box-store12') as box12, \
                broker.subscribe('chain/#', user='operator') as everything:
            time.sleep(0.5)
            topic = 'chain/store12/beacon/door/set/measured_power'
            for user, payload in (('guest', '-40'), ('box-store13', '-41')):
                publish(broker, user, topic, payload)  # mosquitto takes it and drops it
            publish(broker, 'box-store12', 'chain/store13/beacon/door/set/measured_power', '-42')
            publish(broker, 'guest', 'chain/store12/beacon/door/settings', '{"measured_power":-43}')
            publish(broker, 'operator', topic, '-60')
            publish(broker, 'box-store12', 'chain/store12/beacon/door/settings', '{"measured_power":-60}')
            assert wait_until(lambda: box12.on(topic) == ['-60'], 5), box12.all()
            assert wait_until(lambda: len(everything.all()) >= 2, 5), everything.all()
            time.sleep(0.5)
            seen = [(t, p) for _, t, p, _ in everything.all()]
        # Only the operator's command and the box's own settings were delivered, to anyone.
        assert seen == [(topic, '-60'), ('chain/store12/beacon/door/settings', '{"measured_power":-60}')], seen
        assert box12.on(topic) == ['-60']
        # The operator may not write states, only commands.
        publish(broker, 'operator', 'chain/store12/beacon/door/settings', '{"measured_power":-44}')
        assert 'chain/store12/beacon/door/settings' not in broker.retained('chain/#')
    finally:
        broker.close()


def test_calibrate_apply_to_as_a_user_without_the_right_is_refused_by_the_broker(
        ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    profile = tmp_path / 'door.json'
    profile.write_text(PROFILE_TEXT)
    broker = acl_broker(tmp_path)
    box = BoxStandIn(broker, applied, user='box-store12')
    try:
        with broker.subscribe('chain/#', user='operator') as everything:
            r = calibrate(ibeacon_bin, h, profile, broker, '--confirm-timeout', '3', user='box-store13')
            assert r.returncode == 83, (r.returncode, r.stderr)
            assert 'the broker refused the command' in r.stderr and 'Not authorized' in r.stderr, r.stderr
            assert not box.received and not everything.all(), (box.received, everything.all())
            r = calibrate(ibeacon_bin, h, profile, broker, '--confirm-timeout', '10', user='operator')
            assert r.returncode == 0, (r.returncode, r.stderr)
            assert 'door under chain/store12: applied, confirmed by measured_power -59' in r.stdout, r.stdout
            assert len(box.received) == 1
        assert profile.read_text() == PROFILE_TEXT
    finally:
        box.close()
        broker.close()


def heard_power(harness, since: float) -> set[int]:
    return {e['ibeacon']['power'] for e in harness.adv_events(since=since) if e.get('ibeacon')}


def test_a_real_box_takes_commands_from_the_operator_only(ibeacon_bin: Path, harness_factory, tmp_path: Path,
                                                          monkeypatch) -> None:
    """advertise --mqtt-control as box-store12 under the documented ACL: a user without a block
    and box store13 publish to its command topic — nothing changes on the air, on disk, or in
    its settings, and the box saw nothing (no event); the operator's command is applied."""
    h = harness_factory('--scanner', '--address', CSR_CLONE)
    profile = tmp_path / 'door.json'
    profile.write_text(json.dumps({'name': 'door', 'uuid': BEACON_UUID, 'major': MAJOR, 'minor': MINOR,
                                   'measuredPower': -65, 'intervalMs': 100}) + '\n')
    broker = acl_broker(tmp_path)
    monkeypatch.setenv('IBEACON_MQTT_PASSWORD', USERS['box-store12'])
    url = broker.url.replace('://', '://box-store12@')
    proc = start_advertising(ibeacon_bin, h, profile, '--mqtt', url, '--mqtt-base', 'chain/store12',
                             '--mqtt-control')
    settings = 'chain/store12/beacon/door/settings'
    command = 'chain/store12/beacon/door/set/measured_power'
    try:
        assert wait_until(lambda: settings in broker.retained('chain/store12/#'), 10), broker.retained()
        # Its discovery went through the ACL too (its own node only).
        assert wait_until(lambda: any(node('chain/store12') in t for t in broker.retained('homeassistant/#')), 5)
        before = profile.read_text()
        with broker.subscribe('chain/store12/event', user='operator') as events:
            time.sleep(0.3)
            for user in ('guest', 'box-store13'):
                publish(broker, user, command, '-40')
            t = time.monotonic()
            time.sleep(2)
            assert heard_power(h, t) == {-65}, heard_power(h, t)
            assert profile.read_text() == before
            assert json.loads(broker.retained(settings)[settings])['measured_power'] == -65
            assert events.all() == [], events.all()
            publish(broker, 'operator', command, '-60')
            assert wait_until(lambda: json.loads(profile.read_text())['measuredPower'] == -60, 5), profile.read_text()
            assert wait_until(lambda: heard_power(h, time.monotonic() - 0.5) == {-60}, 3), heard_power(h, 0)
            assert wait_until(lambda: len(events.all()) == 1, 3), events.all()
            event = json.loads(events.all()[0][2])
            assert (event['result'], event['old'], event['new']) == ('applied', -65, -60), event
    finally:
        stop_process(proc, 15)
        broker.close()
