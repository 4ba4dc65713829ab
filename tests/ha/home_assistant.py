"""A real Home Assistant Core for the tests (TESTBED.md "A real Home Assistant in tests"): the
release in .venv-ha (make ha-venv), started with `hass --skip-pip` on a temporary configuration
directory with only what the test needs: http on a free loopback port, api, the recorder on SQLite
(committing every change at once), history (its REST API) and the MQTT integration pointed at the test's mosquitto.

Nothing is configured through a UI. The MQTT config entry is written into
.storage/core.config_entries before the first start, as Home Assistant stores one made in its UI,
and a long-lived access token into .storage/auth: a user, a refresh token of type
`long_lived_access_token` with a signing key made here, and an HS256 JWT signed with that key,
issued by that refresh token (what `async_validate_access_token` checks). States, history and
registries are then read back from Home Assistant itself, through its REST API:

    ha = HomeAssistant(tmp_path, broker_port, venv)
    ha.state('binary_sensor.x')                  # GET /api/states/<id>, None when it has none
    ha.template("{{ integration_entities('mqtt') | join(',') }}")  # POST /api/template
    ha.history('binary_sensor.x', since)         # GET /api/history/period/<since>
    ha.close()
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from mqtt_broker import Broker, free_port


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b'=').decode()


def hs256_token(issuer: str, key: str, lifetime: timedelta = timedelta(days=1)) -> str:
    """A JWT as Home Assistant issues access tokens (RFC 7519, HS256)."""
    now = int(time.time())
    header = _b64(json.dumps({'alg': 'HS256', 'typ': 'JWT'}).encode())
    claims = _b64(json.dumps({'iss': issuer, 'iat': now, 'exp': now + int(lifetime.total_seconds())}).encode())
    signature = hmac.new(key.encode(), f'{header}.{claims}'.encode(), hashlib.sha256).digest()
    return f'{header}.{claims}.{_b64(signature)}'


def _storage(key: str, data: dict[str, Any], version: int = 1, minor: int = 1) -> str:
    return json.dumps({'version': version, 'minor_version': minor, 'key': key, 'data': data}, indent=1)


class HomeAssistant:
    def __init__(self, directory: Path, broker: Broker, venv: Path, start_timeout: float = 90) -> None:
        self.dir = directory / 'ha-config'
        (self.dir / '.storage').mkdir(parents=True)
        self.port = free_port()
        self.token = self._write_config(broker.port)
        # Its birth message says its MQTT client is connected and subscribed.
        self.birth = broker.subscribe('homeassistant/status')
        self.log_path = self.dir / 'hass.log'
        self.log = open(self.log_path, 'w')
        # Its own process group: it is stopped whole, whatever it starts.
        self.proc = subprocess.Popen(
            [str(venv / 'bin' / 'hass'), '--config', str(self.dir), '--skip-pip', '--log-file', str(self.log_path)],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, 'PYTHONDONTWRITEBYTECODE': '1'})
        try:
            self._wait_ready(start_timeout)
        except BaseException:
            self.close()
            raise
        finally:
            self.birth.close()

    def _write_config(self, broker_port: int) -> str:
        (self.dir / 'configuration.yaml').write_text(
            'homeassistant:\n'
            '  name: ibeacon test\n  latitude: 52.5\n  longitude: 13.4\n  elevation: 0\n'
            '  unit_system: metric\n  time_zone: UTC\n  currency: EUR\n  country: DE\n'
            f'http:\n  server_host: 127.0.0.1\n  server_port: {self.port}\n'
            'api:\nhistory:\n'
            f'recorder:\n  db_url: sqlite:///{self.dir}/home-assistant_v2.db\n  commit_interval: 0\n'
            # Discovery at info: each config's origin is logged ("from external application …").
            'logger:\n  default: warning\n  logs:\n    homeassistant.components.mqtt.discovery: info\n')
        entry = {
            'entry_id': secrets.token_hex(16), 'version': 1, 'minor_version': 1, 'domain': 'mqtt',
            'title': '127.0.0.1', 'data': {'broker': '127.0.0.1', 'port': broker_port, 'discovery': True},
            'options': {}, 'pref_disable_new_entities': False, 'pref_disable_polling': False, 'source': 'user',
            'unique_id': None, 'disabled_by': None,
        }
        storage = self.dir / '.storage'
        (storage / 'core.config_entries').write_text(_storage('core.config_entries', {'entries': [entry]}))
        user_id, token_id, jwt_key = secrets.token_hex(16), secrets.token_hex(16), secrets.token_hex(64)
        now = datetime.now(timezone.utc)
        auth = {
            'users': [{'id': user_id, 'group_ids': ['system-admin'], 'is_owner': True, 'is_active': True,
                       'name': 'test', 'system_generated': False, 'local_only': False}],
            'groups': [{'id': 'system-admin'}, {'id': 'system-users'}, {'id': 'system-read-only'}],
            'credentials': [],
            'refresh_tokens': [{
                'id': token_id, 'user_id': user_id, 'client_id': None, 'client_name': 'ibeacon tests',
                'client_icon': None, 'token_type': 'long_lived_access_token', 'created_at': now.isoformat(),
                'access_token_expiration': 86400.0, 'token': secrets.token_hex(64), 'jwt_key': jwt_key,
                'last_used_at': None, 'last_used_ip': None, 'expire_at': None, 'credential_id': None,
                'version': None,
            }],
        }
        (storage / 'auth').write_text(_storage('auth', auth))
        return hs256_token(token_id, jwt_key)

    def _wait_ready(self, timeout: float) -> None:
        """Up when the API answers and the MQTT integration is loaded and connected."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f'Home Assistant ended ({self.proc.returncode}):\n{self.log_text()[-4000:]}')
            try:
                if 'online' in self.birth.on('homeassistant/status') and 'mqtt' in self.get('/api/config')['components']:
                    return
            except (OSError, urllib.error.URLError, KeyError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f'Home Assistant not ready in {timeout} s:\n{self.log_text()[-4000:]}')

    # -- REST ------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f'http://127.0.0.1:{self.port}{path}', data=data, method=method,
            headers={'Authorization': f'Bearer {self.token}', 'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get(self, path: str) -> Any:
        status, body = self._request('GET', path)
        assert status == 200, (path, status, body[:500])
        return json.loads(body)

    def template(self, text: str) -> str:
        status, body = self._request('POST', '/api/template', {'template': text})
        assert status == 200, (text, status, body[:500])
        return body.decode()

    def state(self, entity_id: str) -> dict[str, Any] | None:
        """The entity's state object, None when Home Assistant has none (no such entity)."""
        status, body = self._request('GET', f'/api/states/{entity_id}')
        if status == 404:
            return None
        assert status == 200, (entity_id, status, body[:500])
        return json.loads(body)

    def entities(self, integration: str = 'mqtt') -> list[str]:
        text = self.template(f"{{{{ integration_entities('{integration}') | join(',') }}}}")
        return [e for e in text.split(',') if e]

    def history(self, entity_id: str, since: datetime) -> list[dict[str, Any]]:
        """Every state the recorder holds for the entity from `since` (UTC), oldest first."""
        start = since.astimezone(timezone.utc).isoformat()
        rows = self.get(f'/api/history/period/{urllib.request.quote(start)}?filter_entity_id={entity_id}'
                        '&significant_changes_only=0')
        return rows[0] if rows else []

    def log_text(self) -> str:
        return self.log_path.read_text(errors='replace') if self.log_path.exists() else ''

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.log.close()
