"""`advertise --mqtt-control` against a real broker (mosquitto, mqtt_broker.py) and Bumble's emulated
controller: a command published to the broker changes what an independent scanner hears, the
profile on disk and the published settings; every kind of refused command (out of range,
malformed, unknown key, unknown beacon, oversized, retained, a flood) changes none of the three;
a restart comes back with the last applied value.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from mqtt_broker import Broker
from support import MAJOR, MINOR, POWER, _read_err, start_advertising, stop_process, wait_until, write_profile

BASE = 'chain/store12'
SET = f'{BASE}/beacon/bakery/set'
SETTINGS = f'{BASE}/beacon/bakery/settings'


def heard(harness, since: float) -> list[dict]:
    return [e['ibeacon'] for e in harness.adv_events(since=since) if e.get('ibeacon')]


def settings(broker: Broker) -> dict:
    text = broker.retained(SETTINGS).get(SETTINGS)
    return json.loads(text) if text else {}


def events(sub) -> list[dict]:
    return [json.loads(p) for p in sub.on(f'{BASE}/event')]


def start(ibeacon_bin: Path, harness, profile: Path, broker: Broker, *extra: str):
    return start_advertising(ibeacon_bin, harness, profile, '--mqtt', broker.url, '--mqtt-base', BASE,
                             '--mqtt-control', *extra)


def test_a_command_changes_the_air_the_profile_and_the_state_and_survives_a_restart(
        ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    profile = write_profile(tmp_path / 'bakery.json', note='kept')
    harness = harness_factory('--scanner')
    proc = start(ibeacon_bin, harness, profile, broker)
    try:
        assert wait_until(lambda: settings(broker).get('major') == MAJOR, 5), broker.retained()
        store = broker.retained()
        numbers = [t for t in store if t.startswith('homeassistant/number/') and 'beacon_bakery' in t]
        switches = [t for t in store if t.startswith('homeassistant/switch/') and 'beacon_bakery' in t]
        assert len(numbers) == 5 and len(switches) == 1, sorted(store)
        major_config = json.loads(next(store[t] for t in numbers if t.endswith('_major/config')))
        assert major_config['command_topic'] == f'{SET}/major' and major_config['state_topic'] == SETTINGS

        with broker.subscribe(f'{BASE}/event') as sub:
            sent = time.monotonic()
            broker.publish(f'{SET}/major', '4242')
            assert wait_until(lambda: any(b['major'] == 4242 for b in heard(harness, sent)), 3), heard(harness, sent)
            on_air = min(e['t'] for e in harness.adv_events(since=sent) if (e.get('ibeacon') or {}).get('major') == 4242)
            assert on_air - sent < 1.5, on_air - sent  # within 1 s of the command (plus mosquitto_pub's start)
            assert wait_until(lambda: settings(broker).get('major') == 4242, 3), settings(broker)
            # Raw HCI, as the scanner hears it: the old beacon never after the new one, and never
            # a second without either around the change.
            time.sleep(0.5)
            around = [e for e in harness.adv_events(since=sent - 1.0) if e.get('ibeacon')]
            first_new = next(i for i, e in enumerate(around) if e['ibeacon']['major'] == 4242)
            assert first_new > 0 and all(e['ibeacon']['major'] == 4242 for e in around[first_new:]), around
            gap = max(b['t'] - a['t'] for a, b in zip(around, around[1:]))
            assert gap < 1.0, gap
            doc = json.loads(profile.read_text())
            assert doc['major'] == 4242 and doc['minor'] == MINOR and doc['note'] == 'kept'
            assert wait_until(lambda: any(e.get('result') == 'applied' for e in events(sub)), 3)
            applied = next(e for e in events(sub) if e.get('result') == 'applied')
            assert (applied['key'], applied['old'], applied['new']) == ('major', MAJOR, 4242), applied
            assert applied['source'] == f'mqtt:{SET}/major'

            # Off, then on: the scanner stops hearing it, and hears it again.
            broker.publish(f'{SET}/advertising', 'OFF')
            assert wait_until(lambda: settings(broker).get('advertising') is False, 3)
            assert json.loads(profile.read_text())['advertising'] is False
            time.sleep(0.5)
            quiet = time.monotonic()
            time.sleep(1.0)
            assert heard(harness, quiet) == [], 'still on the air after OFF'
            broker.publish(f'{SET}/advertising', 'ON')
            back = time.monotonic()
            assert wait_until(lambda: any(b['major'] == 4242 for b in heard(harness, back)), 3)
            assert wait_until(lambda: settings(broker).get('advertising') is True, 3)  # after the file
            assert 'advertising' not in json.loads(profile.read_text())
    finally:
        stop_process(proc, signal.SIGTERM)

    # A restart advertises the last applied value, from the profile.
    proc = start(ibeacon_bin, harness, profile, broker)
    try:
        since = time.monotonic()
        assert wait_until(lambda: any(b['major'] == 4242 for b in heard(harness, since)), 3)
        assert wait_until(lambda: settings(broker).get('major') == 4242, 5)
    finally:
        stop_process(proc, signal.SIGTERM)
        broker.close()


def test_refused_commands_change_neither_the_air_nor_the_profile_nor_the_state(
        ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    profile = write_profile(tmp_path / 'bakery.json')
    # A retained command waiting on the broker before the box starts: replayed at subscription.
    broker.publish(f'{SET}/minor', '999', retain=True)
    harness = harness_factory('--scanner')
    with broker.subscribe(f'{BASE}/event') as sub:
        proc = start(ibeacon_bin, harness, profile, broker)
        try:
            assert wait_until(lambda: settings(broker).get('major') == MAJOR, 5)
            assert wait_until(lambda: any(e.get('refusal') == 'retained' for e in events(sub)), 5), events(sub)
            before_file = profile.read_text()
            before_settings = settings(broker)
            bad = [
                ('major', '70000', 'out-of-range'),
                ('measured_power', '0', 'out-of-range'),
                ('measured_power', '-59.0', 'malformed'),
                ('interval', 'fast', 'malformed'),
                ('uuid', 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0', 'unknown-key'),
                ('minor', '1' * 5000, 'oversized'),  # a forged payload far beyond any number
                ('calibration', '{"measuredPower": -61}', 'malformed'),
            ]
            for key, payload, _ in bad:
                broker.publish(f'{SET}/{key}', payload)
                time.sleep(0.3)  # under the rate limit
            broker.publish(f'{BASE}/beacon/deli/set/major', '1')
            time.sleep(0.3)
            broker.publish(f'{SET}/minor', '998', retain=True)  # live, but published retained
            expected = [k for _, _, k in bad] + ['unknown-beacon', 'retained']
            assert wait_until(lambda: [e['refusal'] for e in events(sub) if 'refusal' in e][1:] == expected, 5), \
                events(sub)
            # A flood: more than 4 a second, the rest refused (and reported once).
            # One client, one line per message: all twelve within a few milliseconds, after a
            # second without commands (refused ones count against the limit too).
            time.sleep(1.1)
            args = [a for a in broker.client_args() if a != '-v']
            subprocess.run(['mosquitto_pub', *args, '-q', '1', '-t', f'{SET}/minor', '-l'], check=True, timeout=10,
                           input=''.join(f'{minor}\n' for minor in range(10, 22)), text=True)
            assert wait_until(lambda: any(e.get('refusal') == 'rate-limited' for e in events(sub)), 5), events(sub)
            time.sleep(1.5)
            applied = [e for e in events(sub) if e.get('result') == 'applied']
            assert len(applied) == 4, applied  # the limit: 4 a second
            assert [e['new'] for e in applied] == [10, 11, 12, 13], applied
            last_minor = applied[-1]['new']
            assert wait_until(lambda: settings(broker).get('minor') == last_minor, 3)
            assert json.loads(profile.read_text())['minor'] == last_minor
            # Nothing of the refused ones anywhere: the air carries the last applied minor, never 999/998/70000.
            since = time.monotonic()
            time.sleep(1.0)
            on_air = heard(harness, since)
            assert on_air and all(b['minor'] == last_minor and b['major'] == MAJOR and b['power'] == POWER
                                  for b in on_air), on_air
            doc = json.loads(profile.read_text())
            assert {k: v for k, v in doc.items() if k != 'minor'} == \
                {k: v for k, v in json.loads(before_file).items() if k != 'minor'}
            assert {k: v for k, v in settings(broker).items() if k != 'minor'} == \
                {k: v for k, v in before_settings.items() if k != 'minor'}
        finally:
            stop_process(proc, signal.SIGTERM)
            broker.close()


def test_without_mqtt_control_no_command_is_taken(ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    profile = write_profile(tmp_path / 'bakery.json')
    harness = harness_factory('--scanner')
    proc = start_advertising(ibeacon_bin, harness, profile, '--mqtt', broker.url, '--mqtt-base', BASE)
    try:
        assert wait_until(lambda: broker.retained().get(f'{BASE}/beacon/bakery/state') == 'ON', 5)
        before = profile.read_text()
        broker.publish(f'{SET}/major', '7')
        time.sleep(1.5)
        since = time.monotonic()
        time.sleep(0.5)
        assert all(b['major'] == MAJOR for b in heard(harness, since))
        assert profile.read_text() == before
        assert not any('/set/' in t or t.startswith('homeassistant/number') for t in broker.retained()
                       if t != f'{SET}/major')
    finally:
        stop_process(proc, signal.SIGTERM)
        broker.close()


def test_a_beacon_switched_off_stays_off_after_a_restart_until_switched_on(
        ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    profile = write_profile(tmp_path / 'bakery.json', advertising=False)
    harness = harness_factory('--scanner')
    proc = start_advertising(ibeacon_bin, harness, profile, '--mqtt', broker.url, '--mqtt-base', BASE,
                             '--mqtt-control', scanner=False)
    try:
        assert wait_until(lambda: settings(broker).get('advertising') is False, 5), broker.retained()
        assert broker.retained().get(f'{BASE}/beacon/bakery/state') == 'OFF'
        since = time.monotonic()
        time.sleep(1.0)
        assert heard(harness, since) == []
        broker.publish(f'{SET}/advertising', 'ON')
        back = time.monotonic()
        assert wait_until(lambda: any(b['major'] == MAJOR for b in heard(harness, back)), 3)
        assert wait_until(lambda: settings(broker).get('advertising') is True, 3)
        assert 'advertising' not in json.loads(profile.read_text())
        assert wait_until(lambda: broker.retained().get(f'{BASE}/beacon/bakery/state') == 'ON', 3)
    finally:
        stop_process(proc, signal.SIGTERM)
        broker.close()


def test_a_profile_that_cannot_be_written_puts_the_old_value_back_on_the_air(
        ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    """Another writer holds the profile's lock (a calibration running): the change is refused
    (not-written), the old value is back on the air, the file and the settings are unchanged."""
    import fcntl
    import os

    broker = Broker(tmp_path)
    profile = write_profile(tmp_path / 'bakery.json')
    harness = harness_factory('--scanner')
    proc = start(ibeacon_bin, harness, profile, broker)
    lock = os.open(tmp_path / '.bakery.json.lock', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o200)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert wait_until(lambda: settings(broker).get('major') == MAJOR, 5)
        before_file, before_settings = profile.read_text(), settings(broker)
        with broker.subscribe(f'{BASE}/event') as sub:
            broker.publish(f'{SET}/major', '5000')
            assert wait_until(lambda: any(e.get('refusal') == 'not-written' for e in events(sub)), 5), events(sub)
            refused = next(e for e in events(sub) if e.get('refusal') == 'not-written')
            assert 'another ibeacon process' in refused['reason'], refused
        time.sleep(0.5)
        since = time.monotonic()
        time.sleep(1.0)
        on_air = heard(harness, since)
        assert on_air and all(b['major'] == MAJOR for b in on_air), on_air
        assert profile.read_text() == before_file
        assert settings(broker) == before_settings
    finally:
        os.close(lock)
        stop_process(proc, signal.SIGTERM)
        broker.close()


def test_a_command_while_the_controller_is_lost_is_refused_and_never_applied_later(
        ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    """The controller stops answering (the harness drops every command): the box loses it and
    keeps reconnecting. A command sent meanwhile is answered as not-applied within a few
    seconds, saying why, and Home Assistant's state stays the old one. Once the controller
    answers again the box advertises the old value: the refused command never reaches the air,
    the profile or the settings later."""
    broker = Broker(tmp_path)
    profile = write_profile(tmp_path / 'bakery.json')
    harness = harness_factory('--scanner')
    proc = start(ibeacon_bin, harness, profile, broker, '--check-interval', '0.5')
    try:
        assert wait_until(lambda: settings(broker).get('major') == MAJOR, 5)
        before = profile.read_text()
        with broker.subscribe(f'{BASE}/event') as sub:
            harness.send('mute')
            assert wait_until(lambda: 'stopped answering' in _read_err(proc), 15), _read_err(proc)
            sent = time.monotonic()
            broker.publish(f'{SET}/major', '4242')
            assert wait_until(lambda: any(e.get('refusal') == 'not-applied' for e in events(sub)), 10), events(sub)
            answered = time.monotonic() - sent
            refused = next(e for e in events(sub) if e.get('refusal') == 'not-applied')
            assert (refused['key'], refused['old'], refused['new']) == ('major', MAJOR, 4242), refused
            assert 'did not take the change within 3 s' in refused['reason'], refused
            assert 'send the command again once the beacon is back' in refused['reason'], refused
            assert answered < 6, answered  # the 3-s limit, plus mosquitto_pub's start
            assert proc.poll() is None, _read_err(proc)
            assert profile.read_text() == before
            assert settings(broker).get('major') == MAJOR

            harness.send('unmute')
            assert wait_until(lambda: 'advertising resumed' in _read_err(proc), 20), _read_err(proc)
            back = time.monotonic()
            time.sleep(2.0)
            after = heard(harness, back)
            assert after and all(b['major'] == MAJOR for b in after), after
            assert profile.read_text() == before
            assert settings(broker).get('major') == MAJOR
            assert not any(e.get('result') == 'applied' for e in events(sub)), events(sub)
    finally:
        stop_process(proc, signal.SIGTERM)
        broker.close()


def test_a_steered_beacon_that_leaves_takes_its_entities_and_settings_from_the_broker(
        ibeacon_bin: Path, harness_factory, tmp_path: Path) -> None:
    """Two steered beacons, then the box restarted with one: the other's six Home Assistant
    entities are removed (empty retained configs) and its retained settings with them, so the
    next Home Assistant shows no stale value; the staying beacon keeps both."""
    broker = Broker(tmp_path)
    bakery = write_profile(tmp_path / 'bakery.json')
    deli = write_profile(tmp_path / 'deli.json', minor=MINOR + 1)
    deli_settings = f'{BASE}/beacon/deli/settings'

    def deli_configs() -> list[str]:
        return [t for t in broker.retained() if t.startswith('homeassistant/') and 'beacon_deli_' in t]

    harness = harness_factory('--scanner')
    proc = start(ibeacon_bin, harness, bakery, broker, '--profile', str(deli))
    try:
        assert wait_until(lambda: deli_settings in broker.retained(f'{BASE}/#'), 5), broker.retained()
        assert len(deli_configs()) == 6, deli_configs()
    finally:
        stop_process(proc, signal.SIGTERM)
    proc = start(ibeacon_bin, harness, bakery, broker)
    try:
        assert wait_until(lambda: not deli_configs(), 30), deli_configs()
        assert wait_until(lambda: deli_settings not in broker.retained(f'{BASE}/#'), 30), broker.retained()
        assert settings(broker).get('major') == MAJOR
        kept = [t for t in broker.retained() if t.startswith('homeassistant/') and 'beacon_bakery_' in t]
        assert len(kept) == 6, kept
    finally:
        stop_process(proc, signal.SIGTERM)
        broker.close()
