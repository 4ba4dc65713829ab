"""Fixtures for the tests against a real Home Assistant (home_assistant.py), beside the shared
ones in tests/conftest.py (the Bumble harness, the ibeacon binary): one mosquitto and one Home
Assistant for the whole module (starting Home Assistant takes 10-20 s)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from home_assistant import HomeAssistant
from mqtt_broker import Broker

HA_VENV = Path(os.environ.get('HA_VENV', Path(__file__).resolve().parents[2] / '.venv-ha'))


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
