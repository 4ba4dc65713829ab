"""Issue 30, items 6–12: what a client of the store's broker, a careless install and a hook can
get out of `--mqtt` and `--exec`. The broker is a real mosquitto on a loopback port
(mqtt_broker.py); the adversary is mosquitto_pub. Hooks run from a btsnoop capture written here
(no radio needed); the capabilities test runs ibeacon as nobody with an ambient CAP_NET_ADMIN
(setpriv), as the shipped units do.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from mqtt_broker import Broker, free_port
from support import BEACON_UUID, MAJOR, MINOR, run, wait_until, write_profile
from test_monitor import Monitor
from test_runtime_hostile import capture

BEACON = f'{BEACON_UUID},{MAJOR},{MINOR},-59,100,D0:00:00:00:00:01'
BAKERY = f'bakery={BEACON_UUID}:{MAJOR}:{MINOR}'
BASE = 'test/box'
STATUS = 'homeassistant/status'


def peak_rss_kib(pid: int) -> int:
    """VmHWM: the most resident memory the process ever had, in KiB."""
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1])
    raise AssertionError('no VmHWM')


def start_monitor(ibeacon_bin: Path, harness_factory, broker: Broker, *extra: str) -> Monitor:
    """monitor --mqtt, once its region is inside and published (so it is subscribed too)."""
    h = harness_factory('--beacon', BEACON, '--scanner')
    m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--mqtt', broker.url,
                '--mqtt-base', BASE, *extra)
    m.wait_for('inside', 'bakery', timeout=8)
    assert wait_until(lambda: broker.retained().get(f'{BASE}/region/bakery/state') == 'ON', 5), m.stderr
    return m


# --- item 6: one large message on homeassistant/status ----------------------------------------

def test_a_100_mb_message_on_the_status_topic_costs_the_box_nothing(ibeacon_bin: Path, harness_factory,
                                                                    tmp_path: Path) -> None:
    """Anyone may publish on homeassistant/status. The box tells the broker (MQTT 5 Maximum
    Packet Size) that it takes nothing over 64 KiB: the 100 MB message is never sent to it.
    Before: libmosquitto read it whole, copied it, and the callback copied it twice more."""
    broker = Broker(tmp_path)
    try:
        m = start_monitor(ibeacon_bin, harness_factory, broker)
        try:
            before = peak_rss_kib(m.proc.pid)
            big = tmp_path / 'big'
            big.write_bytes(b'x' * 100_000_000)
            args = [a for a in broker.client_args() if a != '-v']
            subprocess.run(['mosquitto_pub', *args, '-t', STATUS, '-f', str(big)], check=True, timeout=60)
            big.unlink()
            # Delivered in order after the big one: once it is answered, the big one has been
            # dealt with (read and dropped before; never sent after).
            broker.publish(STATUS, 'online')
            assert wait_until(lambda: 'Home Assistant restarted' in m.stderr, 30), m.stderr
            after = peak_rss_kib(m.proc.pid)
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
        print(f'peak RSS {before} KiB before the 100 MB message, {after} KiB after')
        assert after - before < 16 * 1024, (before, after)
    finally:
        broker.close()


# --- item 7: a flood of `online` ----------------------------------------------------------------

def test_a_flood_of_online_is_answered_once_and_a_real_restart_still_is(ibeacon_bin: Path, harness_factory,
                                                                        tmp_path: Path) -> None:
    """2,000 `online` in a burst: one republish at once and one for the rest when the 5 s
    interval is over (at most three if the burst straddles an interval), as many log lines.
    Before: one republish (every retained topic) and one log line per message. A single
    `online` after a quiet interval is answered at once."""
    broker = Broker(tmp_path)
    try:
        m = start_monitor(ibeacon_bin, harness_factory, broker)
        try:
            # Every retained topic of the box but its health (whose rate moves on its own).
            box = {t for t in broker.retained() if (t.startswith(f'{BASE}/') or t.startswith('homeassistant/'))
                   and not t.endswith('/health')}
            assert f'{BASE}/monitor/availability' in box and any(t.endswith('/config') for t in box), box
            with broker.subscribe('#') as sub:
                assert wait_until(lambda: len(sub.all()) >= len(box), 3)
                seen = len(sub.all())
                args = [a for a in broker.client_args() if a != '-v']
                subprocess.run(['mosquitto_pub', *args, '-t', STATUS, '-l'], input='online\n' * 2000, text=True,
                               check=True, timeout=60)
                published = lambda: [t for r, t, _, _ in sub.all()[seen:] if t in box]  # noqa: E731
                assert wait_until(lambda: len(published()) >= len(box), 10), sub.all()[seen:]
                time.sleep(7)  # past the interval: the trailing republish, and nothing after it
                count = len(published())
                lines = m.stderr.count(f'online on {STATUS}')
                print(f'2,000 online: {count} publications of the box\'s {len(box)} topics, {lines} log lines')
                assert len(box) <= count <= 3 * len(box), count
                assert 1 <= lines <= 3, m.stderr
                assert 'once for all of them' in m.stderr, m.stderr
                # Home Assistant's real restart, an interval after the last republish: answered at once.
                time.sleep(5)
                seen = len(sub.all())
                broker.publish(STATUS, 'online')
                assert wait_until(lambda: len(published()) >= len(box), 3), sub.all()[seen:]
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
    finally:
        broker.close()


# --- item 8: names MQTT cannot carry --------------------------------------------------------------

@pytest.mark.parametrize('name, words', [
    ('bakery\ufffe', 'noncharacter U+FFFE'),
    ('b\ufdd0', 'noncharacter U+FDD0'),
    ('x\U0010ffff', 'noncharacter U+10FFFF'),
    ('y' * 70_000, 'MQTT allows at most 65535'),
])
def test_a_region_name_mqtt_cannot_carry_is_refused_at_start(ibeacon_bin: Path, tmp_path: Path, name: str,
                                                             words: str) -> None:
    """libmosquitto refuses to publish to such a topic; the refused retained message stayed first
    in line, so no message of any region was sent again. Refused at start (64), from --region
    and from a profile's name."""
    port = free_port()
    good = ['--region', f'{BAKERY}']
    bad = ['--region', f'{name}={BEACON_UUID}:1:2']
    result = run(ibeacon_bin, 'monitor', '--device', 'tcp:127.0.0.1:9', *good, *bad, '--mqtt',
                 f'mqtt://127.0.0.1:{port}')
    assert result.returncode == 64, result.stderr[:2000]
    assert 'region' in result.stderr and words in result.stderr, result.stderr[:2000]
    assert 'rename' in result.stderr or 'shorter name' in result.stderr, result.stderr[:2000]
    profile = write_profile(tmp_path / 'p.json', name=name, minor=7)
    result = run(ibeacon_bin, 'monitor', '--device', 'tcp:127.0.0.1:9', *good, '--profile', str(profile), '--mqtt',
                 f'mqtt://127.0.0.1:{port}')
    assert result.returncode == 64, result.stderr[:2000]
    assert words in result.stderr, result.stderr[:2000]


def test_a_bad_name_next_to_a_good_region_is_refused_before_it_blocks_the_events(ibeacon_bin: Path, harness_factory,
                                                                                 tmp_path: Path) -> None:
    """What item 8 was: with a noncharacter in one region's name, its refused state stayed first
    in line and no event of any region reached the broker (before: 0 events on BASE/event in
    8 s while bakery was entered). Now the name is refused at start."""
    broker = Broker(tmp_path)
    try:
        h = harness_factory('--beacon', BEACON, '--scanner')
        with broker.subscribe(f'{BASE}/event') as sub:
            proc = subprocess.Popen([str(ibeacon_bin), 'monitor', '--device', h.device_spec, '--region', BAKERY,
                                     '--region', f'bad\ufffe={BEACON_UUID}:1:2', '--mqtt', broker.url,
                                     '--mqtt-base', BASE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                rc = proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)
                rc = None
            print(f'exit {rc}; {len(sub.all())} events on {BASE}/event')
        assert rc == 64, rc
        assert 'noncharacter U+FFFE' in proc.stderr.read()
    finally:
        broker.close()


# --- item 9: the password in a malformed URL ----------------------------------------------------

@pytest.mark.parametrize('url', [
    'http://box:S3cr3tPw@127.0.0.1',
    'mqtt://box:S3cr3tPw@127.0.0.1/topic',
    'mqtt://box:S3cr3tPw@127.0.0.1?x=1',
    'mqtt://box:S3cr3tPw@[::1',
    'mqtt://box:S3cr3tPw@127.0.0.1:99999',
    'mqtt//box:S3cr3tPw@127.0.0.1',
])
def test_a_malformed_url_never_shows_its_password(ibeacon_bin: Path, url: str) -> None:
    result = run(ibeacon_bin, 'scan', '--device', 'tcp:127.0.0.1:9', '--mqtt', url)
    assert result.returncode == 64, result.stderr
    assert 'S3cr3tPw' not in result.stderr + result.stdout, result.stderr
    assert 'box:***@' in result.stderr or 'password in the URL is refused' in result.stderr, result.stderr


# --- item 10: a password file others may read -------------------------------------------------

@pytest.mark.parametrize('mode, owner, words', [
    (0o644, 0, ['readable by every user', 'mode 0644', 'chmod 600']),
    (0o620, 0, ['writable by users other than its owner', 'mode 0620', 'chmod 600']),
    (0o600, 65534, ['belongs to uid 65534', 'chown root']),
    (0o600, 0, []),
    (0o640, 0, []),
])
def test_a_password_file_others_may_read_or_change_is_warned_about(ibeacon_bin: Path, tmp_path: Path, mode: int,
                                                                   owner: int, words: list[str]) -> None:
    password = tmp_path / 'mqtt.password'
    password.write_text('s3cret\n')
    os.chmod(password, mode)
    os.chown(password, owner, 0)
    port = free_port()
    result = run(ibeacon_bin, 'scan', '--device', 'tcp:127.0.0.1:9', '--duration', '1', '--mqtt',
                 f'mqtt://box@127.0.0.1:{port}', '--mqtt-password-file', str(password))
    warnings = [line for line in result.stderr.splitlines() if 'password file' in line]
    if not words:
        assert warnings == [], result.stderr
    else:
        assert len(warnings) == 1, result.stderr
        assert str(password) in warnings[0] and all(w in warnings[0] for w in words), warnings
    assert 's3cret' not in result.stderr


# --- items 11, 12: what a hook inherits ----------------------------------------------------------

def test_a_hook_gets_no_mqtt_password(ibeacon_bin: Path, tmp_path: Path) -> None:
    cap = capture(tmp_path / 'c.btsnoop', [0, 500_000])
    env = dict(os.environ, IBEACON_MQTT_PASSWORD='S3cr3tPw')
    proc = subprocess.run([str(ibeacon_bin), 'monitor', '--region', BEACON_UUID, '--device', f'btsnoop:{cap}',
                           '--exec', f'env > {tmp_path}/env', '--exec-shell'], capture_output=True, text=True,
                          timeout=30, env=env)
    assert proc.returncode == 0, proc.stderr
    seen = (tmp_path / 'env').read_text()
    assert 'IBEACON_EVENT=' in seen, seen  # the hook ran, with its event
    assert 'S3cr3tPw' not in seen and 'IBEACON_MQTT_PASSWORD' not in seen, seen


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which('setpriv') is None, reason='needs root and setpriv')
def test_a_hook_gets_none_of_the_units_ambient_capabilities(ibeacon_bin: Path) -> None:
    """As the units run it: an unprivileged user with an ambient CAP_NET_ADMIN and a binary
    without file capabilities. Before: the hook had CAP_NET_ADMIN ambient, permitted and
    effective. Now it has nothing, while ibeacon keeps its own."""
    work = Path(tempfile.mkdtemp(prefix='ibeacon-caps-'))
    try:
        os.chmod(work, 0o777)
        cap = capture(work / 'c.btsnoop', [0, 500_000])
        os.chmod(cap, 0o644)
        hook = (f'grep ^Cap /proc/self/status > {work}/hook; grep ^Cap /proc/$PPID/status > {work}/ibeacon; '
                f'tr "\\0" "\\n" < /proc/$PPID/environ > {work}/environ')
        proc = subprocess.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
                               '--inh-caps=+net_admin', '--ambient-caps=+net_admin', '--',
                               str(ibeacon_bin), 'monitor', '--region', BEACON_UUID, '--device', f'btsnoop:{cap}',
                               '--exec', hook, '--exec-shell'], capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, IBEACON_MQTT_PASSWORD='S3cr3tPw'))
        assert proc.returncode == 0, proc.stderr
        # Nor can it read the password from ibeacon's own environment: same user, but ibeacon
        # holds a capability the hook lacks, so the kernel refuses (ptrace access check).
        environ = (work / 'environ').read_text() if (work / 'environ').exists() else ''
        print(f'/proc/PPID/environ read by the hook: {len(environ)} bytes')
        assert 'S3cr3tPw' not in environ
        caps = dict(line.split(':\t') for line in (work / 'hook').read_text().splitlines())
        mine = dict(line.split(':\t') for line in (work / 'ibeacon').read_text().splitlines())
        print('hook:', caps, 'ibeacon:', mine)
        assert mine['CapAmb'] == mine['CapEff'] == '0000000000001000', mine  # the setup worked
        for field in ('CapAmb', 'CapEff', 'CapPrm', 'CapInh'):
            assert int(caps[field], 16) == 0, caps
    finally:
        shutil.rmtree(work)


# --- held and kept (regression guards) ------------------------------------------------------------

@pytest.mark.parametrize('case', ['self-signed', 'wrong host name'])
def test_mqtts_refuses_a_broker_it_cannot_verify(ibeacon_bin: Path, harness_factory, tmp_path: Path,
                                                 case: str) -> None:
    """A broker whose certificate the system's CAs do not vouch for (the test CA not given), and
    one whose certificate names another host (the right CA given): no connection, said in the
    log, nothing published; monitoring goes on. Also over MQTT 5."""
    san = 'DNS:localhost,IP:127.0.0.1' if case == 'self-signed' else 'DNS:wrong.example'
    broker = Broker(tmp_path, tls=True, san=san)
    try:
        assert broker.tls is not None
        ca = [] if case == 'self-signed' else ['--mqtt-ca', str(broker.tls['ca'])]
        h = harness_factory('--beacon', BEACON, '--scanner')
        m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--mqtt', broker.url,
                    '--mqtt-base', BASE, *ca)
        try:
            m.wait_for('inside', 'bakery', timeout=8)
            assert wait_until(lambda: 'TLS' in m.stderr or 'certificate' in m.stderr, 8), m.stderr
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
        assert not any(t.startswith(f'{BASE}/') for t in broker.retained()), broker.retained()
    finally:
        broker.close()


class MQTT311Broker:
    """A broker that speaks MQTT 3.1.1 only, as brokers before MQTT 5 did: a v5 CONNECT gets the
    3.1.1 CONNACK "unacceptable protocol version" (1) and the connection is closed; a 3.1.1
    client is accepted, its SUBSCRIBEs acknowledged, its PUBLISHes recorded, and `send` delivers
    a PUBLISH to it."""

    def __init__(self) -> None:
        import socket
        import threading
        self.listener = socket.create_server(('127.0.0.1', 0))
        self.port = self.listener.getsockname()[1]
        self.levels: list[int] = []
        self.subscribed: list[str] = []
        self.published: list[tuple[str, bytes]] = []
        self.client = None
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _read(conn, n: int) -> bytes:
        out = b''
        while len(out) < n:
            chunk = conn.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out

    def _packet(self, conn) -> tuple[int, bytes]:
        kind = self._read(conn, 1)[0]
        length, shift = 0, 0
        while True:
            b = self._read(conn, 1)[0]
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return kind, self._read(conn, length)

    @staticmethod
    def _length(n: int) -> bytes:
        out = b''
        while True:
            b, n = n & 0x7F, n >> 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    def _serve(self) -> None:
        while True:
            conn, _ = self.listener.accept()
            try:
                kind, body = self._packet(conn)
                level = body[6]
                self.levels.append(level)
                if level != 4:
                    conn.sendall(bytes([0x20, 0x02, 0x00, 0x01]))
                    conn.close()
                    continue
                conn.sendall(bytes([0x20, 0x02, 0x00, 0x00]))
                self.client = conn
                while True:
                    kind, body = self._packet(conn)
                    if kind & 0xF0 == 0x80:  # SUBSCRIBE: id, then (topic, qos)…
                        n = int.from_bytes(body[2:4], 'big')
                        self.subscribed.append(body[4:4 + n].decode())
                        conn.sendall(bytes([0x90, 0x03]) + body[0:2] + b'\x00')
                    elif kind & 0xF0 == 0x30:  # PUBLISH, QoS 0
                        n = int.from_bytes(body[0:2], 'big')
                        self.published.append((body[2:2 + n].decode(), body[2 + n:]))
                    elif kind == 0xC0:
                        conn.sendall(bytes([0xD0, 0x00]))
            except (EOFError, OSError):
                conn.close()

    def send(self, topic: str, payload: bytes) -> None:
        body = len(topic).to_bytes(2, 'big') + topic.encode() + payload
        self.client.sendall(bytes([0x30]) + self._length(len(body)) + body)

    def close(self) -> None:
        self.listener.close()


def test_a_broker_without_mqtt_5_gets_mqtt_3_1_1(ibeacon_bin: Path, harness_factory) -> None:
    """The MQTT 5 CONNECT refused as an unacceptable protocol version: the next attempt is 3.1.1,
    which works as before (states published, Home Assistant's `online` answered); a message over
    64 KiB is dropped there without a copy, and memory does not grow by four times its size."""
    broker = MQTT311Broker()
    try:
        h = harness_factory('--beacon', BEACON, '--scanner')
        m = Monitor(ibeacon_bin, '--device', h.device_spec, '--region', BAKERY, '--mqtt',
                    f'mqtt://127.0.0.1:{broker.port}', '--mqtt-base', BASE)
        try:
            m.wait_for('inside', 'bakery', timeout=8)
            assert wait_until(lambda: STATUS in broker.subscribed, 10), (broker.levels, m.stderr)
            assert broker.levels[:2] == [5, 4], broker.levels
            assert 'does not speak MQTT 5; trying MQTT 3.1.1' in m.stderr, m.stderr
            assert wait_until(lambda: (f'{BASE}/region/bakery/state', b'ON') in broker.published, 5), broker.published
            before = peak_rss_kib(m.proc.pid)
            broker.send(STATUS, b'x' * 50_000_000)
            broker.send(STATUS, b'online')
            assert wait_until(lambda: 'Home Assistant restarted' in m.stderr, 30), m.stderr
            after = peak_rss_kib(m.proc.pid)
        finally:
            assert m.stop(signal.SIGTERM) == 0, m.stderr
        print(f'MQTT 3.1.1: peak RSS {before} KiB before a 50 MB message, {after} KiB after')
        # libmosquitto reads it whole and copies it (2 × 50 MB); the callback no longer adds 2 more.
        assert after - before < 150 * 1024, (before, after)
    finally:
        broker.close()
