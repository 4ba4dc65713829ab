"""`calibrate --apply-to NAME`: the measured power goes, with its evidence, to the box that
advertises NAME, over a real mosquitto (mqtt_broker.py), instead of into a profile here. A box
stand-in (mosquitto_sub/mosquitto_pub, as the box's contract says it answers) confirms or
refuses; without one, calibrate says it was not confirmed (83); a refusal is 84. The local
profile is read for the beacon's identity and never written.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

from mqtt_broker import Broker
from support import start_advertising, stop_process, wait_until
from test_profile_store import BEACON, PROFILE_TEXT

BASE = 'chain/store12'
COMMAND = f'{BASE}/beacon/door/set/calibration'


class BoxStandIn:
    """Waits for one command on `topic` (as `user`) and answers with `answer(payload)`: a list
    of (topic, payload, retained) the box would publish."""

    def __init__(self, broker: Broker, answer, user: str | None = None, topic: str = COMMAND) -> None:
        self.received: list[tuple[str, str]] = []
        self.proc = subprocess.Popen(['mosquitto_sub', *broker.client_args(user), '-t', topic, '-C', '1', '-q', '1',
                                      '-F', '%r|%t|%p', '-W', '60'], stdout=subprocess.PIPE, text=True)
        self.broker, self.answer, self.user = broker, answer, user
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            retained, topic, payload = line.rstrip('\n').split('|', 2)
            self.received.append((retained, topic, payload))
            for t, p, r in self.answer(payload):
                assert self.broker.publish(t, p, user=self.user, retain=r).returncode == 0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=5)


def calibrate(ibeacon_bin: Path, harness, profile: Path, broker: Broker, *extra: str,
              user: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    url = broker.url
    if user:
        url = url.replace('://', f'://{user}@')
        env['IBEACON_MQTT_PASSWORD'] = broker.users[user]
    return subprocess.run([str(ibeacon_bin), 'calibrate', '--profile', str(profile), '--device', harness.device_spec,
                           '--mqtt', url, '--mqtt-base', BASE, '--apply-to', 'door', *extra],
                          capture_output=True, text=True, timeout=90, env=env)


def applied(payload: str) -> list[tuple[str, str, bool]]:
    """What a box that accepts the command publishes: its settings (retained) and an event."""
    command = json.loads(payload)
    power = command['measuredPower']
    return [(f'{BASE}/beacon/door/settings', json.dumps({'measured_power': power, 'tx_power': None, 'interval': 100,
                                                         'major': 258, 'minor': 772, 'advertising': 'ON'}), True),
            (f'{BASE}/event', json.dumps({'event': 'applied', 'beacon': 'door', 'key': 'calibration', 'source': 'mqtt',
                                          'old': -65, 'new': power, 'reason': None}), False)]


def test_the_calibration_goes_to_the_box_with_its_evidence_and_the_box_confirms(
        ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    profile = tmp_path / 'door.json'
    profile.write_text(PROFILE_TEXT)
    broker = Broker(tmp_path)
    # Stale settings retained from before: they must not count as the box's answer.
    broker.publish(f'{BASE}/beacon/door/settings', json.dumps({'measured_power': -59}), retain=True)
    box = BoxStandIn(broker, applied)
    try:
        with broker.subscribe(f'{BASE}/#') as sub:
            r = calibrate(ibeacon_bin, h, profile, broker, '--json')
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)
        assert result['measuredPower'] == -59 and result['written'] is False, result
        # The command: once, not retained, with the evidence calibrate would write into a profile.
        commands = [m for m in sub.all() if m[1] == COMMAND]
        assert len(commands) == 1 and commands[0][0] is False, sub.all()
        sent = json.loads(commands[0][2])
        assert sent['measuredPower'] == -59
        evidence = sent['calibration']
        assert evidence['samples'] == result['samples'] >= 10 and evidence['method'] == result['method']
        assert evidence['receiver'] == h.device_spec and evidence['estimate'] == round(result['estimate'], 2)
        assert evidence['timestamp'].endswith('Z') and abs(evidence['interval95']) <= 1, evidence
        assert set(evidence) == {'timestamp', 'samples', 'estimate', 'interval95', 'spread', 'method', 'receiver',
                                 'receiverAddress', 'offset', 'txPower'}, evidence
        # Nothing retained under the command topic; the local profile untouched.
        assert COMMAND not in broker.retained(f'{BASE}/#')
        assert profile.read_text() == PROFILE_TEXT
    finally:
        box.close()
        broker.close()


def test_no_box_is_83_and_a_refusal_is_84_and_the_profile_stays(ibeacon_bin: Path, harness_factory,
                                                                tmp_path: Path) -> None:
    h = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    profile = tmp_path / 'door.json'
    profile.write_text(PROFILE_TEXT)
    broker = Broker(tmp_path)
    try:
        r = calibrate(ibeacon_bin, h, profile, broker, '--confirm-timeout', '2')
        assert r.returncode == 83, (r.returncode, r.stderr)
        assert 'no box confirmed it within 2' in r.stderr and COMMAND in r.stderr, r.stderr

        def refuse(payload: str):
            power = json.loads(payload)['measuredPower']
            return [(f'{BASE}/event', json.dumps({'event': 'refused', 'beacon': 'door', 'key': 'calibration',
                                                  'source': 'mqtt', 'old': -65, 'new': power,
                                                  'reason': 'measured power out of range'}), False)]
        box = BoxStandIn(broker, refuse)
        try:
            r = calibrate(ibeacon_bin, h, profile, broker)
        finally:
            box.close()
        assert r.returncode == 84, (r.returncode, r.stderr)
        assert 'the box refused measured power -59 dBm for door: measured power out of range' in r.stderr, r.stderr
        assert profile.read_text() == PROFILE_TEXT
    finally:
        broker.close()


def test_apply_to_needs_the_broker_and_the_boxs_base(ibeacon_bin: Path, tmp_path: Path) -> None:
    profile = tmp_path / 'door.json'
    profile.write_text(PROFILE_TEXT)
    base = [str(ibeacon_bin), 'calibrate', '--profile', str(profile), '--device', 'hci0', '--apply-to', 'door']
    for extra, said in (([], 'needs --mqtt URL'), (['--mqtt', 'mqtt://127.0.0.1'], 'needs --mqtt-base BASE'),
                        (['--mqtt', 'mqtt://127.0.0.1', '--mqtt-base', 'a', '--no-mqtt-discovery'],
                         '--no-mqtt-discovery is for the commands that publish states')):
        r = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=10)
        assert r.returncode == 64 and said in r.stderr, (extra, r.stderr)
    r = subprocess.run([*base[:-2], '--mqtt', 'mqtt://127.0.0.1'], capture_output=True, text=True, timeout=10)
    assert r.returncode == 64 and '--mqtt is for --apply-to' in r.stderr, r.stderr
    assert profile.read_text() == PROFILE_TEXT


def test_a_real_box_applies_the_calibration_and_keeps_the_evidence(ibeacon_bin: Path, harness_factory,
                                                                  tmp_path: Path) -> None:
    """The whole path: calibrate here (a beacon heard at -59 dBm), the box (advertise --mqtt-control
    on its own emulated controller) puts -59 on the air, writes it and the record into its profile,
    and confirms; what a scanner next to the box hears changes."""
    measured = harness_factory('--beacon', BEACON, '--rssi', 'constant:-59')
    box_radio = harness_factory('--scanner')
    box_profile = tmp_path / 'box' / 'door.json'
    box_profile.parent.mkdir()
    box_profile.write_text(PROFILE_TEXT)  # measuredPower -65
    laptop_copy = tmp_path / 'door.json'
    laptop_copy.write_text(PROFILE_TEXT)
    broker = Broker(tmp_path)
    box = start_advertising(ibeacon_bin, box_radio, box_profile, '--mqtt', broker.url, '--mqtt-base', BASE,
                            '--mqtt-control')
    try:
        settings = f'{BASE}/beacon/door/settings'
        assert wait_until(lambda: settings in broker.retained(f'{BASE}/#'), 10), broker.retained()
        r = calibrate(ibeacon_bin, measured, laptop_copy, broker, '--json')
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)
        doc = json.loads(box_profile.read_text())
        assert doc['measuredPower'] == result['measuredPower'] == -59, doc
        assert doc['calibration']['samples'] == result['samples'] and doc['calibration']['method'] == result['method']
        assert doc['calibration']['receiver'] == measured.device_spec and doc['installer'] == {'who': 'x'}
        t = time.monotonic()
        assert wait_until(lambda: {e['ibeacon']['power'] for e in box_radio.adv_events(since=t)
                                   if e.get('ibeacon')} == {-59}, 3)
        assert json.loads(broker.retained(settings)[settings])['measured_power'] == -59
        assert laptop_copy.read_text() == PROFILE_TEXT
    finally:
        stop_process(box, 15)
        broker.close()
