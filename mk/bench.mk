# Benchmarks (see BENCHMARKS.md for the method). Not timed tests: run by hand or `make bench`.
BENCH_SECONDS ?= 60
BENCH_EVENTS ?= 200000

.PHONY: bench bench-decode bench-advertise

bench: bench-decode bench-advertise ## run the benchmarks of BENCHMARKS.md

bench-decode: deps venv
	$(SWIFT) build -c release --product ibeacon-bench
	$(SWIFT) build -c release --product ibeacon
	mkdir -p out
	$(PYTHON) scripts/bench/make_capture.py out/bench-scan.btsnoop $(BENCH_EVENTS)
	@echo "ibeacon (Swift):"; .build/release/ibeacon-bench out/bench-scan.btsnoop 5 | tee out/bench-decode-swift.json
	@echo "Bumble (Python):"; $(PYTHON) scripts/bench/bumble_decode.py out/bench-scan.btsnoop 1 | tee out/bench-decode-bumble.json
	@echo "ibeacon scan pipeline:"; $(PYTHON) scripts/bench/scan_cpu.py .build/release/ibeacon out/bench-scan.btsnoop | tee out/bench-scan-cpu.json

bench-advertise: deps venv
	$(SWIFT) build -c release --product ibeacon
	mkdir -p out
	$(PYTHON) scripts/bench/advertise.py .build/release/ibeacon $(BENCH_SECONDS) 10 | tee out/bench-advertise.json

SOAK_SECONDS ?= 3600
SOAK_INTERVAL ?= 60

.PHONY: soak soak-ci

soak: deps venv ## 1-hour advertising soak with a controller fault every minute (RELIABILITY.md)
	$(SWIFT) build -c release --product ibeacon
	$(PYTHON) scripts/soak.py .build/release/ibeacon $(SOAK_SECONDS) $(SOAK_INTERVAL)

soak-ci: deps venv ## the soak shortened for CI: 2 minutes, a fault every 10 s
	$(SWIFT) build --product ibeacon
	$(PYTHON) scripts/soak.py .build/debug/ibeacon 120 10
