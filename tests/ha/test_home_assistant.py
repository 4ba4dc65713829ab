"""What a real Home Assistant Core (2024.3.3, its MQTT integration and recorder) makes of what
`ibeacon` publishes: a real mosquitto, the Bumble emulated radio, and every state, attribute,
entity and device read back from Home Assistant itself (its REST API and its log), not from our
reading of its documentation (issue 32).

Each test uses its own regions, base topic and adapter address, so one Home Assistant and one
broker serve the module.
"""

from __future__ import annotations

import json

import signal
import socket
from datetime import datetime, timezone
from pathlib import Path

from home_assistant import HomeAssistant
from mqtt_broker import Broker
from support import BEACON_UUID, MAJOR, MINOR, Monitor, fnv_digest, wait_until

BEACON = f'{BEACON_UUID},{MAJOR},{MINOR},-59,100,D0:00:00:00:00:01'
REGION = f'{BEACON_UUID}:{MAJOR}:{MINOR}'
ON_OFF = {'inside': 'on', 'outside': 'off'}


def monitor(ibeacon_bin: Path, harness, broker: Broker, base: str, *regions: str, exit_after: float = 1) -> Monitor:
    region_args = [a for r in regions for a in ('--region', r)]
    return Monitor(ibeacon_bin, '--device', harness.device_spec, *region_args, '--exit-after', str(exit_after),
                   '--mqtt', broker.url, '--mqtt-base', base)


def entity(ha: HomeAssistant, part: str, timeout: float = 15) -> str:
    """The one MQTT entity of Home Assistant whose id contains `part`."""
    assert wait_until(lambda: [e for e in ha.entities() if part in e], timeout), (ha.entities(), ha.log_text()[-3000:])
    found = [e for e in ha.entities() if part in e]
    assert len(found) == 1, found
    return found[0]


def ha_state(ha: HomeAssistant, entity_id: str) -> str | None:
    s = ha.state(entity_id)
    return s['state'] if s else None


def first_state(m: Monitor, region: str, timeout: float = 8) -> str:
    """The first state the monitor determined for `region` (inside or outside)."""
    assert wait_until(lambda: [e for e in m.of(region=region) if e['state'] in ON_OFF], timeout), (m.events, m.stderr)
    return next(e['state'] for e in m.of(region=region) if e['state'] in ON_OFF)


def states_of(m: Monitor, region: str) -> list[str]:
    """Every state the monitor went through for `region`, as Home Assistant names them, repeats folded."""
    return changes([{'state': ON_OFF.get(e['state'], e['state'])} for e in m.of(region=region)])


def changes(rows: list[dict]) -> list[str]:
    """The states of a history, consecutive repeats (attribute-only rows) folded."""
    out: list[str] = []
    for row in rows:
        if not out or out[-1] != row['state']:
            out.append(row['state'])
    return out


def test_restarts_never_show_a_dead_process_state(ibeacon_bin: Path, harness_factory, broker: Broker,
                                                  home_assistant: HomeAssistant) -> None:
    """The monitor is stopped (SIGTERM, or SIGKILL: the Last Will) and started again 20 times,
    the beacon staying, leaving, staying away and coming back while it is down. Home Assistant's
    recorder must hold, after each `unavailable`, the state the new process determined and
    nothing else: never the dead process's retained state, never `unknown`."""
    ha = home_assistant
    h = harness_factory('--beacon', BEACON, '--scanner', '--address', 'C0:32:00:00:00:01')
    base = 'ha/restart'
    m = monitor(ibeacon_bin, h, broker, base, f'door={REGION}')
    presence = [True, False, False, True] * 5
    try:
        assert wait_until(lambda: states_of(m, 'door')[-1:] == ['on'], 8), (m.events, m.stderr)
        door = entity(ha, 'region_door')
        assert wait_until(lambda: ha_state(ha, door) == 'on', 10), ha.state(door)
        since = datetime.now(timezone.utc)
        expected = ['on']
        for i, present in enumerate(presence):
            assert m.stop(signal.SIGKILL if i % 2 else signal.SIGTERM) in (0, -signal.SIGKILL), m.stderr
            assert wait_until(lambda: ha_state(ha, door) == 'unavailable', 5), ha.state(door)
            h.send('beacon-on 0' if present else 'beacon-off 0')
            m = monitor(ibeacon_bin, h, broker, base, f'door={REGION}')
            now = 'on' if present else 'off'
            assert wait_until(lambda: states_of(m, 'door')[-1:] == [now], 8), (m.events, m.stderr)
            assert wait_until(lambda: ha_state(ha, door) == now, 10), (ha.state(door), m.stderr)
            # What this process determined, in order (under load an 'off' may come before the first report).
            expected += ['unavailable', *states_of(m, 'door')]
        assert wait_until(lambda: changes(ha.history(door, since))[-1:] == expected[-1:], 10)
        recorded = changes(ha.history(door, since))
    finally:
        m.stop(signal.SIGTERM)
    assert recorded == expected, recorded


def test_a_region_removed_from_the_configuration_leaves_home_assistant(
        ibeacon_bin: Path, harness_factory, broker: Broker, home_assistant: HomeAssistant) -> None:
    ha = home_assistant
    h = harness_factory('--beacon', BEACON, '--scanner', '--address', 'C0:32:00:00:00:02')
    base = 'ha/removal'
    m = monitor(ibeacon_bin, h, broker, base, f'till={REGION}', f'stockroom={BEACON_UUID}:1:2')
    try:
        first_state(m, 'stockroom')
        till, stockroom = entity(ha, 'region_till'), entity(ha, 'region_stockroom')
        assert wait_until(lambda: ha_state(ha, stockroom) == 'off', 10), ha.state(stockroom)
    finally:
        assert m.stop(signal.SIGTERM) == 0, m.stderr
    m = monitor(ibeacon_bin, h, broker, base, f'till={REGION}')
    try:
        first_state(m, 'till')
        assert wait_until(lambda: stockroom not in ha.entities() and ha.state(stockroom) is None, 10), \
            (ha.entities(), ha.state(stockroom), m.stderr)
        assert wait_until(lambda: ha_state(ha, till) == 'on', 10), ha.state(till)
        # Nothing of it is left on the broker (its states go a little after its config).
        assert wait_until(lambda: not [t for t in broker.retained() if 'stockroom' in t], 8), broker.retained()
        assert 'no longer configured here' in m.stderr, m.stderr
    finally:
        assert m.stop(signal.SIGTERM) == 0, m.stderr


def test_two_boxes_with_one_host_name_are_two_devices_and_a_shared_base_is_said(
        ibeacon_bin: Path, harness_factory, broker: Broker, home_assistant: HomeAssistant) -> None:
    """Cloned boxes: one host name (here: both run on this machine), other adapters. Each is its
    own device with its own entity in Home Assistant; two that share a base topic each say so."""
    ha = home_assistant
    a = harness_factory('--beacon', BEACON, '--scanner', '--address', 'C0:32:00:00:00:0A')
    b = harness_factory('--scanner', '--address', 'C0:32:00:00:00:0B')
    ma = monitor(ibeacon_bin, a, broker, 'ha/store-a', f'shelf={REGION}', exit_after=3)
    mb = monitor(ibeacon_bin, b, broker, 'ha/store-b', f'shelf={REGION}', exit_after=3)
    mc = None
    try:
        assert (first_state(ma, 'shelf'), first_state(mb, 'shelf')) == ('inside', 'outside')
        both = lambda: sorted(e for e in ha.entities() if 'region_shelf' in e)  # noqa: E731
        assert wait_until(lambda: len(both()) == 2, 15), (both(), ha.log_text()[-2000:])
        assert wait_until(lambda: sorted(ha_state(ha, e) or '' for e in both()) == ['off', 'on'], 10), \
            [ha.state(e) for e in both()]
        devices = {ha.template(f"{{{{ device_id('{e}') }}}}") for e in both()}
        assert len(devices) == 2 and all(devices), devices
        host = socket.gethostname()
        assert all(host.lower().replace('.', '_').replace('-', '_') in e.replace('-', '_') for e in both()), both()
        # A third process with box B's adapter under box A's base: both boxes say so.
        mc = monitor(ibeacon_bin, b, broker, 'ha/store-a', f'shelf={REGION}')
        clash = 'publishes under ha/store-a too'
        assert wait_until(lambda: clash in mc.stderr and clash in ma.stderr, 10), (ma.stderr, mc.stderr)
    finally:
        for m in (ma, mb, mc):
            if m is not None:
                m.stop(signal.SIGTERM)


def test_attributes_arrive_whole_with_their_state_and_the_device_says_its_version(
        ibeacon_bin: Path, harness_factory, broker: Broker, home_assistant: HomeAssistant) -> None:
    """Each change is one row in the recorder, with the attributes that go with it (none
    dropped by Home Assistant's attribute filter); the device has a sw_version and the
    discovery an origin, as Home Assistant itself reports them."""
    ha = home_assistant
    h = harness_factory('--beacon', BEACON, '--scanner', '--address', 'C0:32:00:00:00:04')
    m = monitor(ibeacon_bin, h, broker, 'ha/attributes', f'porch={REGION}', exit_after=3)
    since = datetime.now(timezone.utc)
    try:
        assert first_state(m, 'porch') == 'inside'
        porch = entity(ha, 'region_porch')
        assert wait_until(lambda: ha_state(ha, porch) == 'on', 10)
        h.send('beacon-off 0')
        m.wait_for('exit', 'porch', timeout=6)
        assert wait_until(lambda: ha_state(ha, porch) == 'off', 10)
        h.send('beacon-on 0')
        m.wait_for('enter', 'porch', timeout=6)
        assert wait_until(lambda: ha_state(ha, porch) == 'on', 10)
    finally:
        assert m.stop(signal.SIGTERM) == 0, m.stderr
    state = ha.state(porch)
    assert state is not None
    assert wait_until(lambda: [r['state'] for r in ha.history(porch, since)][-1:] == ['unavailable'], 10)
    rows = [r for r in ha.history(porch, since) if r['state'] in ('on', 'off')]
    assert [r['state'] for r in rows] == ['on', 'off', 'on'], rows
    for row in rows:  # one row per change, each with its own attributes
        attributes = row['attributes']
        assert attributes['presence'] == {'on': 'inside', 'off': 'outside'}[row['state']], row
        assert attributes['region'] == 'porch' and attributes['reason'] and attributes['time'], row
    assert ha.template(f"{{{{ device_attr('{porch}', 'sw_version') }}}}") == '0.1.0'
    assert ha.template(f"{{{{ device_attr('{porch}', 'manufacturer') }}}}") == 'ibeacon'
    assert 'region_porch from external application ibeacon, version: 0.1.0' in ha.log_text(), ha.log_text()[-3000:]
    # Nothing we published made Home Assistant complain.
    complaints = [line for line in ha.log_text().splitlines()
                  if ('WARNING' in line or 'ERROR' in line) and 'mqtt' in line]
    assert not complaints, complaints


def test_the_receivers_health_is_a_diagnostic_entity_that_goes_deaf(
        ibeacon_bin: Path, harness_factory, broker: Broker, home_assistant: HomeAssistant) -> None:
    """A store operator tells "nobody there" from "the receiver stopped hearing": the box's
    receiver (hearing, or deaf with the reason `monitor` knows) and the reports it hears per
    minute are entities of its device, diagnostic ones."""
    ha = home_assistant
    h = harness_factory('--beacon', BEACON, '--scanner', '--address', 'C0:32:00:00:00:05')
    m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', f'aisle={REGION}', '--exit-after', '1',
                '--watchdog', '2', '--mqtt', broker.url, '--mqtt-base', 'ha/health')
    try:
        node = f'c03200000005_{fnv_digest("ha/health")}'  # the address, then the base's digest
        receiver, reports = entity(ha, f'{node}_monitor_receiver'), entity(ha, f'{node}_monitor_reports')
        assert wait_until(lambda: ha_state(ha, receiver) == 'hearing', 10), ha.state(receiver)
        # The emulated beacon advertises every 100 ms: hundreds of reports a minute.
        assert wait_until(lambda: (ha_state(ha, reports) or '').isdigit() and int(ha_state(ha, reports)) >= 100, 15), \
            ha.state(reports)
        attributes = ha.state(receiver)['attributes']
        assert attributes['adapter'] == 'C0:32:00:00:00:05' and attributes['version'] == '0.1.0', attributes
        assert ha.template(f"{{{{ device_id('{receiver}') == device_id('{entity(ha, 'region_aisle')}') }}}}") == 'True'
        configs = {t: json.loads(p) for t, p in broker.retained('homeassistant/sensor/#').items() if p}
        assert {c['entity_category'] for c in configs.values() if 'c0320000000' in c['unique_id']} == {'diagnostic'}
        # Nothing heard at all for --watchdog seconds: deaf, with the reason, and the region unknown.
        h.send('beacon-off 0')
        assert wait_until(lambda: ha_state(ha, receiver) == 'deaf', 10), ha.state(receiver)
        attributes = ha.state(receiver)['attributes']
        assert attributes['cause'] == 'watchdog' and attributes['reason'], attributes
        assert attributes['lastRecoveryCause'] == attributes['reason'] and attributes['lastRecovery'], attributes
        assert ha_state(ha, entity(ha, 'region_aisle')) == 'unknown'
        h.send('beacon-on 0')
        assert wait_until(lambda: ha_state(ha, receiver) == 'hearing', 10), ha.state(receiver)
        assert ha.state(receiver)['attributes']['lastRecoveryCause'] == attributes['reason']
    finally:
        assert m.stop(signal.SIGTERM) == 0, m.stderr


def test_cloned_boxes_of_one_address_under_two_bases_are_two_devices(
        ibeacon_bin: Path, harness_factory, broker: Broker, home_assistant: HomeAssistant) -> None:
    """One host name (both run here, as cloned images do) and one adapter address (00:1A:7D:DA:71:13,
    as CSR-clone dongles have): only the base tells chain/store12 from chain/store13. Each is its
    own device, with its own entity showing its own state (before: one discovery config, and
    Home Assistant showed store 13's state for store 12's region)."""
    ha = home_assistant
    a = harness_factory('--beacon', BEACON, '--scanner', '--address', '00:1A:7D:DA:71:13')
    b = harness_factory('--scanner', '--address', '00:1A:7D:DA:71:13')
    m12 = monitor(ibeacon_bin, a, broker, 'chain/store12', f'till7={REGION}', exit_after=3)
    m13 = monitor(ibeacon_bin, b, broker, 'chain/store13', f'till7={REGION}', exit_after=3)
    try:
        assert (first_state(m12, 'till7'), first_state(m13, 'till7')) == ('inside', 'outside')
        both = lambda: sorted(e for e in ha.entities() if 'region_till7' in e)  # noqa: E731
        assert wait_until(lambda: len(both()) == 2, 15), (both(), ha.log_text()[-2000:])
        # The node carries the base's digest (MQTTLayout.baseDigest, pinned in MQTTTests).
        store12 = next(e for e in both() if '164b5f65' in e)
        store13 = next(e for e in both() if '3dd98a86' in e)
        assert wait_until(lambda: (ha_state(ha, store12), ha_state(ha, store13)) == ('on', 'off'), 10), \
            (ha.state(store12), ha.state(store13))
        devices = {ha.template(f"{{{{ device_id('{e}') }}}}") for e in (store12, store13)}
        assert len(devices) == 2 and all(devices), devices
        assert ha.template(f"{{{{ device_attr('{store12}', 'name') }}}}").endswith('(chain/store12)')
    finally:
        for m in (m12, m13):
            m.stop(signal.SIGTERM)
