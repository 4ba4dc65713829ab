"""Fixtures for the tests against a real Home Assistant (home_assistant.py): the end-to-end
fixtures (the Bumble harness, the ibeacon binary) from tests/e2e/conftest.py, one mosquitto and
one Home Assistant for the whole module (starting Home Assistant takes 10-20 s)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

E2E = Path(__file__).resolve().parents[1] / 'e2e'
sys.path.insert(0, str(E2E))
_spec = importlib.util.spec_from_file_location('e2e_conftest', E2E / 'conftest.py')
assert _spec and _spec.loader
e2e_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(e2e_conftest)
harness_factory = e2e_conftest.harness_factory
ibeacon_bin = e2e_conftest.ibeacon_bin

from home_assistant import HomeAssistant  # noqa: E402
from mqtt_broker import Broker  # noqa: E402

HA_VENV = Path(os.environ.get('HA_VENV', e2e_conftest.REPO_ROOT / '.venv-ha'))


@pytest.fixture(scope='module')
def broker(tmp_path_factory) -> Iterator[Broker]:
    b = Broker(tmp_path_factory.mktemp('broker'))
    yield b
    b.close()


@pytest.fixture(scope='module')
def home_assistant(tmp_path_factory, broker: Broker) -> Iterator[HomeAssistant]:
    if not (HA_VENV / 'bin' / 'hass').exists():
        pytest.fail(f'no Home Assistant in {HA_VENV}: make ha-venv (or set HA_VENV)')
    ha = HomeAssistant(tmp_path_factory.mktemp('ha'), broker, HA_VENV)
    yield ha
    ha.close()
