# Calibration accuracy (BENCHMARKS.md, "Calibration accuracy"; docs/CALIBRATION.md).
CALSIM_SEEDS ?= 200
CALSIM_E2E_SEEDS ?= 1-10

.PHONY: calsim calsim-lists calsim-e2e

calsim: ## the calibration simulation: every RSSI model, $(CALSIM_SEEDS) seeds, against the estimator
	$(SWIFT) build -c release --product ibeacon-calsim
	.build/release/ibeacon-calsim --seeds $(CALSIM_SEEDS)
	.build/release/ibeacon-calsim --seeds $(CALSIM_SEEDS) --detection 1.28 --models gauss-4,shadow-3s+rayleigh

calsim-lists: ## regenerate the RSSI lists the end-to-end calibration test replays (tests/e2e/data/calsim)
	$(SWIFT) build -c release --product ibeacon-calsim
	@set -e; for m in $$(.build/release/ibeacon-calsim --list); do \
	  .build/release/ibeacon-calsim --dump $$m --seed 1 --duration 40 > "tests/e2e/data/calsim/$$m.txt"; \
	  echo "$$m $$(.build/release/ibeacon-calsim --truth $$m)"; \
	done > tests/e2e/data/calsim/truth.txt

calsim-e2e: deps venv debug ## the calibration models through the emulated radio, seeds $(CALSIM_E2E_SEEDS)
	$(SWIFT) build -c release --product ibeacon-calsim
	$(PYTHON) scripts/calsim_e2e.py --seeds $(CALSIM_E2E_SEEDS) --ibeacon .build/debug/ibeacon
