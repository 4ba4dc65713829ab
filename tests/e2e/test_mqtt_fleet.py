"""Two boxes that nothing but their base topic tells apart: one host name (both run here, as
boxes cloned from one image) and one adapter address (the harness controllers both answer
00:1A:7D:DA:71:13, as cheap CSR-clone dongles do), under chain/store12 and chain/store13. Each
must be its own node on a real mosquitto: its own discovery topics, unique ids and device, and
the cleanup of the node the two shared in earlier versions must take only its own config.
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

from mqtt_broker import Broker
from support import BEACON_UUID, MAJOR, MINOR, wait_until
from test_monitor import Monitor

BEACON = f'{BEACON_UUID},{MAJOR},{MINOR},-59,100,D0:00:00:00:00:01'
CSR_CLONE = '00:1A:7D:DA:71:13'


def host_node() -> str:
    """The node earlier versions used: the host name and the address, as identifiers."""
    safe = ''.join(c if c.isascii() and (c.isalnum() or c in '-_') else '_' for c in socket.gethostname())
    return f"{safe}_{CSR_CLONE.replace(':', '').lower()}"


def test_two_boxes_of_one_host_name_and_one_address_are_two_nodes(ibeacon_bin: Path, harness_factory,
                                                                   tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    old = f'homeassistant/binary_sensor/{host_node()}/region_shelf/config'
    # What the older version left: one config at the node both boxes shared, last written by store 13.
    legacy = {'availability_topic': 'chain/store13/monitor/availability',
              'state_topic': 'chain/store13/region/shelf/attributes', 'name': 'shelf'}
    assert broker.publish(old, json.dumps(legacy), retain=True).returncode == 0
    boxes = {}
    try:
        a = harness_factory('--beacon', BEACON, '--scanner', '--address', CSR_CLONE)
        b = harness_factory('--scanner', '--address', CSR_CLONE)
        for store, h in (('store12', a), ('store13', b)):
            boxes[store] = Monitor(ibeacon_bin, '--device', h.device_spec, '--region',
                                   f'shelf={BEACON_UUID}:{MAJOR}:{MINOR}', '--exit-after', '2',
                                   '--mqtt', broker.url, '--mqtt-base', f'chain/{store}')

        def configs() -> dict[str, dict]:
            return {t: json.loads(p) for t, p in broker.retained('homeassistant/#').items()
                    if p and t.endswith('/region_shelf/config')}
        assert wait_until(lambda: len(configs()) == 2, 15), (configs(), boxes['store12'].stderr)
        found = configs()
        by_base = {c['availability_topic'].split('/')[1]: (t, c) for t, c in found.items()}
        assert sorted(by_base) == ['store12', 'store13'], found
        (t12, c12), (t13, c13) = by_base['store12'], by_base['store13']
        assert t12 != t13 and c12['unique_id'] != c13['unique_id'], (t12, t13)
        assert c12['device']['identifiers'] != c13['device']['identifiers']
        assert c12['state_topic'] == 'chain/store12/region/shelf/attributes'
        assert c13['state_topic'] == 'chain/store13/region/shelf/attributes'
        # The config of the shared node is store 13's: store 13 removes it, store 12 leaves it alone.
        assert old not in found
        assert wait_until(lambda: 'no longer configured here' in boxes['store13'].stderr, 5), boxes['store13'].stderr
        assert 'no longer configured here' not in boxes['store12'].stderr, boxes['store12'].stderr
        # Each base holds its own box's state: inside where the beacon is, outside where it is not.
        states = lambda: {s: broker.retained(f'chain/{s}/region/shelf/state').get(  # noqa: E731
            f'chain/{s}/region/shelf/state') for s in boxes}
        assert wait_until(lambda: states() == {'store12': 'ON', 'store13': 'OFF'}, 10), states()
    finally:
        for m in boxes.values():
            assert m.stop(signal.SIGTERM) == 0, m.stderr
        broker.close()
