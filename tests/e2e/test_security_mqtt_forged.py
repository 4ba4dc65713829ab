"""Issue 40, holes 2, 5, 6 and 7: forged discovery configs and box notes from a client allowed to
publish under the discovery prefix or the box's base. The broker is a real mosquitto
(mqtt_broker.py); the adversary is mosquitto_pub. Before: one forged config naming the box's
state topic and availability emptied both; 2,000 added a log line each and were republished at
every Home Assistant `online`; 2,000 box notes logged 2,000 errors.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mqtt_broker import Broker
from test_security_mqtt import BASE, STATUS, start_monitor

AVAILABILITY = f'{BASE}/monitor/availability'
STATE = f'{BASE}/region/bakery/state'


def node_of(broker: Broker) -> str:
    """The box's node id, from its own discovery config topic (PREFIX/COMPONENT/NODE/OBJECT/config)."""
    configs = [t for t in broker.retained() if t.startswith('homeassistant/') and t.endswith('/config')]
    assert configs, broker.retained()
    return configs[0].split('/')[2]


def forged(node: str, n: int) -> tuple[str, str]:
    payload = (f'{{"availability_topic":"{AVAILABILITY}","state_topic":"{STATE}",'
               f'"json_attributes_topic":"{AVAILABILITY}","n":{n}}}')
    return f'homeassistant/binary_sensor/{node}/forged_{n}/config', payload


@contextmanager
def monitored_broker(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> Iterator[tuple[Broker, object]]:
    """A real mosquitto and a monitor publishing to it; the monitor must end with exit 0."""
    broker = Broker(tmp_path)
    try:
        m = start_monitor(ibeacon_bin, harness_factory, broker)
        try:
            yield broker, m
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
    finally:
        broker.close()


def pub_lines(broker: Broker, topic_payloads: list[tuple[str, str]]) -> None:
    args = [a for a in broker.client_args() if a != '-v']
    for topic, payload in topic_payloads:
        subprocess.run(['mosquitto_pub', *args, '-t', topic, '-m', payload], check=True, timeout=30)


def test_a_forged_config_leaves_the_live_state_and_online(ibeacon_bin: Path, harness_factory,
                                                           tmp_path: Path) -> None:
    with monitored_broker(ibeacon_bin, harness_factory, tmp_path) as (broker, m):
        node = node_of(broker)
        pub_lines(broker, [forged(node, 1)])
        time.sleep(4)  # past the 2 s delay after which a removed entity's states are emptied
        retained = broker.retained()
        assert retained.get(STATE) == 'ON', (retained, m.stderr)
        assert retained.get(AVAILABILITY) == 'online', (retained, m.stderr)


def test_floods_of_forged_configs_and_box_notes_are_bounded(ibeacon_bin: Path, harness_factory,
                                                            tmp_path: Path) -> None:
    with monitored_broker(ibeacon_bin, harness_factory, tmp_path) as (broker, m):
        node = node_of(broker)
        args = [a for a in broker.client_args() if a != '-v']
        # mosquitto_pub -l sends one message per line, on one topic: one topic per config
        # needs a client each; 300 are enough to pass every bound (5 lines a minute, 256 waiting).
        pub_lines(broker, [forged(node, n) for n in range(300)])
        subprocess.run(['mosquitto_pub', *args, '-t', f'{BASE}/monitor/box', '-l'],
                       input=''.join(f'{{"node":"forged_{n}"}}\n' for n in range(2000)), text=True,
                       check=True, timeout=60)
        time.sleep(3)
        removals = m.stderr.count('no longer configured here')
        clashes = m.stderr.count('another box (forged_')
        print(f'300 forged configs: {removals} log lines; 2,000 box notes: {clashes} log lines')
        assert removals <= 5, m.stderr[-3000:]
        assert 1 <= clashes <= 5, m.stderr[-3000:]
        retained = broker.retained()
        assert retained.get(STATE) == 'ON' and retained.get(AVAILABILITY) == 'online', retained
        # Home Assistant's online republishes the box's own topics, not the forged removals.
        with broker.subscribe('#') as sub:
            time.sleep(1)
            seen = len(sub.all())
            broker.publish(STATUS, 'online')
            time.sleep(3)
            empties = [t for r, t, p, _ in sub.all()[seen:] if p == '' and 'forged_' in t]
            assert empties == [], empties[:5]


def test_the_client_id_cannot_be_guessed(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    """Hole 7: the id `ibeacon-HOST-COMMAND-PID` a sweep could hit now ends in 16 random hex
    digits; a client connecting with the guessable id takes nobody's session."""
    with monitored_broker(ibeacon_bin, harness_factory, tmp_path) as (broker, m):
        log = (tmp_path / 'mosquitto.log').read_text()
        ids = re.findall(r' as (ibeacon-\S+) ', log)
        assert ids, log
        box_id = ids[0]
        print(f'client id: {box_id}')
        host = re.sub(r'[^A-Za-z0-9_-]', '_', socket.gethostname())
        assert re.fullmatch(rf'ibeacon-.+-monitor-{m.proc.pid}-[0-9a-f]{{16}}', box_id), box_id
        guess = f'ibeacon-{host}-monitor-{m.proc.pid}'
        args = [a for a in broker.client_args() if a != '-v']
        subprocess.run(['mosquitto_sub', *args, '-i', guess, '-t', 'x', '-W', '1'], timeout=10)
        time.sleep(1)
        log = (tmp_path / 'mosquitto.log').read_text()
        assert f'Client {box_id} already connected' not in log, log[-2000:]
        assert broker.retained().get(AVAILABILITY) == 'online'
