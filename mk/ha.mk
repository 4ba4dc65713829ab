# A real Home Assistant Core against what ibeacon publishes (tests/ha, issue 32): its own
# virtualenv, .venv-ha, kept between runs (an uncached install took 7 min on a loaded 2-core
# box: Home Assistant, its frontend and their pinned dependencies from PyPI). Home Assistant
# first, without its dependencies, so that the release's own package_constraints.txt pins the rest.
HA_VENV ?= .venv-ha
HA_VERSION := $(shell sed -n 's/^homeassistant==//p' tests/ha/requirements.txt)

.PHONY: ha-venv test-ha

# Installed again only when tests/ha/requirements.txt changes (its copy is the stamp: a fresh
# clone's new file times do not count), so a venv outside the clone (HA_VENV=…) is reused.
ha-venv: ## Home Assistant Core $(HA_VERSION) in $(HA_VENV), for make test-ha
	@if ! cmp -s tests/ha/requirements.txt $(HA_VENV)/.ok; then \
	  set -e; rm -rf $(HA_VENV); python3 -m venv $(HA_VENV); \
	  $(HA_VENV)/bin/pip install -q --disable-pip-version-check --no-deps homeassistant==$(HA_VERSION); \
	  $(HA_VENV)/bin/pip install -q --disable-pip-version-check -r tests/ha/requirements.txt \
	    -c "$$($(HA_VENV)/bin/python -c 'import homeassistant, os; print(os.path.dirname(homeassistant.__file__))')/package_constraints.txt"; \
	  cp tests/ha/requirements.txt $(HA_VENV)/.ok; \
	fi

test-ha: deps test-deps venv ha-venv debug ## ibeacon against a real Home Assistant, mosquitto and the emulated radio (about a minute)
	IBEACON_BIN=$(CURDIR)/.build/debug/ibeacon HA_VENV=$(abspath $(HA_VENV)) $(PYTHON) -m pytest -q tests/ha
