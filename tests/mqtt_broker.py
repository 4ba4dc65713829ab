"""A real MQTT broker for the tests: Debian's `mosquitto` on a free loopback port with a temporary
config (TESTBED.md "A real MQTT broker in tests"), read with `mosquitto_sub -v -F '%r|%t|%p'`.

    broker = Broker(tmp_path)                 # plain listener
    broker = Broker(tmp_path, tls=True, users={'box': 'secret'})
    broker.url                                # mqtt://127.0.0.1:PORT (mqtts:// with tls)
    broker.retained()                         # {topic: payload} of the retained store
    with broker.subscribe('#') as sub: ...    # live messages (retained flag, topic, payload, time)
    broker.kill(); broker.start()             # SIGKILL, then again on the same port, store empty
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def make_ca(directory: Path, san: str = 'DNS:localhost,IP:127.0.0.1') -> dict[str, Path]:
    """A CA and a server certificate for `san` (127.0.0.1/localhost) made with openssl, EC P-256."""
    d = directory
    key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
    subprocess.run(['openssl', 'req', '-x509', *key, '-keyout', d / 'ca.key', '-out', d / 'ca.crt', '-days', '2',
                    '-subj', '/CN=ibeacon test CA'], check=True, capture_output=True)
    subprocess.run(['openssl', 'req', *key, '-keyout', d / 'server.key', '-out', d / 'server.csr',
                    '-subj', '/CN=localhost'], check=True, capture_output=True)
    ext = d / 'san.ext'
    ext.write_text(f'subjectAltName={san}\n')
    subprocess.run(['openssl', 'x509', '-req', '-in', d / 'server.csr', '-CA', d / 'ca.crt', '-CAkey', d / 'ca.key',
                    '-CAcreateserial', '-out', d / 'server.crt', '-days', '2', '-extfile', ext],
                   check=True, capture_output=True)
    return {'ca': d / 'ca.crt', 'cert': d / 'server.crt', 'key': d / 'server.key'}


class Subscription:
    """`mosquitto_sub -v -F '%r|%t|%p'` in the background: every message with its retained flag."""

    def __init__(self, broker: 'Broker', topic: str, user: str | None = None) -> None:
        self.proc = subprocess.Popen(['mosquitto_sub', *broker.client_args(user), '-t', topic, '-F', '%r|%t|%p'],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.messages: list[tuple[bool, str, str, float]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            retained, topic, payload = line.rstrip('\n').split('|', 2)
            with self._lock:
                self.messages.append((retained == '1', topic, payload, time.monotonic()))

    def on(self, topic: str) -> list[str]:
        with self._lock:
            return [m[2] for m in self.messages if m[1] == topic]

    def all(self) -> list[tuple[bool, str, str, float]]:
        with self._lock:
            return list(self.messages)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=5)

    def __enter__(self) -> 'Subscription':
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Broker:
    def __init__(self, directory: Path, tls: bool = False, users: dict[str, str] | None = None,
                 start: bool = True, san: str = 'DNS:localhost,IP:127.0.0.1', acl: Path | None = None) -> None:
        self.dir = directory
        self.acl = acl
        self.port = free_port()
        self.tls = make_ca(directory, san) if tls else None
        self.users = users or {}
        self.proc: subprocess.Popen | None = None
        self.config = directory / 'mosquitto.conf'
        self._write_config()
        if start:
            self.start()

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        lines = [f'listener {self.port} 127.0.0.1', 'persistence false',
                 f'user {pwd.getpwuid(os.getuid()).pw_name}']
        if self.tls:
            lines += [f"cafile {self.tls['ca']}", f"certfile {self.tls['cert']}", f"keyfile {self.tls['key']}"]
        if self.users:
            passwords = self.dir / 'passwords'
            passwords.write_text('')
            for user, password in self.users.items():
                subprocess.run(['mosquitto_passwd', '-b', passwords, user, password], check=True,
                               capture_output=True)
            lines += [f'password_file {passwords}', 'allow_anonymous false']
            if self.acl:
                lines.append(f'acl_file {self.acl}')
        else:
            lines.append('allow_anonymous true')
        self.config.write_text('\n'.join(lines) + '\n')

    def client_args(self, user: str | None = None) -> list[str]:
        """mosquitto_sub/pub's arguments, as `user` (default: the first of `users`)."""
        args = ['-h', '127.0.0.1', '-p', str(self.port), '-v']
        if self.tls:
            args += ['--cafile', str(self.tls['ca'])]
        if self.users:
            user = user or next(iter(self.users))
            args += ['-u', user, '-P', self.users[user]]
        return args

    def publish(self, topic: str, payload: str, user: str | None = None, retain: bool = False,
                mqtt5_qos1: bool = False, check: bool = True) -> subprocess.CompletedProcess[str]:
        """mosquitto_pub as `user`; `mqtt5_qos1`: over MQTT 5 at QoS 1 (the broker answers a refusal)."""
        args = [a for a in self.client_args(user) if a != '-v']
        extra = (['-r'] if retain else []) + (['-V', '5', '-q', '1'] if mqtt5_qos1 else [])
        return subprocess.run(['mosquitto_pub', *args, *extra, '-t', topic, '-m', payload],
                              capture_output=True, text=True, timeout=10, check=check)

    def start(self) -> None:
        self.log = open(self.dir / 'mosquitto.log', 'a')
        self.proc = subprocess.Popen(['mosquitto', '-c', str(self.config)], stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(('127.0.0.1', self.port), timeout=0.2):
                    return
            except OSError:
                assert self.proc.poll() is None, (self.dir / 'mosquitto.log').read_text()
                time.sleep(0.05)
        raise RuntimeError('mosquitto did not start listening')

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=5)

    def retained(self, topic: str = '#', seconds: float = 1.0) -> dict[str, str]:
        """The retained store under `topic`: what a new subscriber gets at once."""
        try:
            out = subprocess.run(['mosquitto_sub', *self.client_args(), '-t', topic, '-F', '%r|%t|%p',
                                  '--retained-only', '-W', str(max(1, int(seconds)))],
                                 capture_output=True, text=True, timeout=seconds + 10).stdout
        except subprocess.TimeoutExpired as e:
            # mosquitto_sub's -W did not end it once (a CI run under load): it had connected and
            # printed the whole retained store, then never exited. What it printed is the store.
            out = e.output.decode() if isinstance(e.output, bytes) else (e.output or '')
            if not out:
                raise
        store = {}
        for line in out.splitlines():
            retained, t, payload = line.split('|', 2)
            assert retained == '1', line
            store[t] = payload
        return store

    def subscribe(self, topic: str = '#', user: str | None = None) -> Subscription:
        return Subscription(self, topic, user)

    def close(self) -> None:
        self.kill()
