# Benchmarks (see BENCHMARKS.md for the method). Not timed tests: run by hand or `make bench`.
BENCH_SECONDS ?= 60
BENCH_EVENTS ?= 200000

.PHONY: bench bench-decode bench-advertise bench-mqtt

bench: bench-decode bench-advertise ## run the benchmarks of BENCHMARKS.md

bench-decode: deps venv ## decoding, scan and monitor benchmarks against Bumble (BENCHMARKS.md; out/bench-*.json)
	$(SWIFT) build $(RELEASE_FLAGS) --product ibeacon-bench
	$(SWIFT) build $(RELEASE_FLAGS) --product ibeacon
	mkdir -p out
	$(PYTHON) scripts/bench/make_capture.py out/bench-scan.btsnoop $(BENCH_EVENTS)
	@echo "ibeacon (Swift):"; .build/release/ibeacon-bench out/bench-scan.btsnoop 5 | tee out/bench-decode-swift.json
	@echo "Bumble (Python):"; $(PYTHON) scripts/bench/bumble_decode.py out/bench-scan.btsnoop 1 | tee out/bench-decode-bumble.json
	$(PYTHON) scripts/bench/make_capture.py --reports-only out/bench-reports.btsnoop 200000
	$(PYTHON) scripts/bench/make_capture.py --reports-only --size-mb 250 out/bench-250mb.btsnoop
	@echo "ibeacon scan --json --reports of a reports-only capture against Bumble, peak RSS on 250 MB:"; $(PYTHON) scripts/bench/scan_json.py .build/release/ibeacon out/bench-reports.btsnoop 5 --rss out/bench-250mb.btsnoop | tee out/bench-scan-json.json
	@echo "ibeacon scan, replayed capture:"; $(PYTHON) scripts/bench/scan_cpu.py .build/release/ibeacon out/bench-scan.btsnoop | tee out/bench-scan-cpu.json
	@echo "ibeacon scan, live at 3,000 reports/s:"; $(PYTHON) scripts/bench/scan_live.py .build/release/ibeacon 3000 20 | tee out/bench-scan-live.json
	@echo "ibeacon monitor, 200 beacons live at 3,000 reports/s:"; $(PYTHON) scripts/bench/monitor_live.py .build/release/ibeacon 3000 20 200 52 | tee out/bench-monitor-live.json

bench-advertise: deps venv ## advertise: peak memory and start-up time of the release binary (BENCHMARKS.md)
	$(SWIFT) build $(RELEASE_FLAGS) --product ibeacon
	mkdir -p out
	$(PYTHON) scripts/bench/advertise.py .build/release/ibeacon $(BENCH_SECONDS) 10 | tee out/bench-advertise.json

SOAK_SECONDS ?= 3600
SOAK_INTERVAL ?= 60

.PHONY: soak soak-ci

soak: deps venv ## 1-hour advertising soak with a controller fault every minute (RELIABILITY.md)
	$(SWIFT) build $(RELEASE_FLAGS) --product ibeacon
	$(PYTHON) scripts/soak.py .build/release/ibeacon $(SOAK_SECONDS) $(SOAK_INTERVAL)

soak-ci: deps venv ## the soak shortened for CI: 2 minutes, a fault every 10 s
	$(SWIFT) build --product ibeacon
	$(PYTHON) scripts/soak.py .build/debug/ibeacon 120 10

# MQTT: event-to-broker latency, CPU and memory with 200 regions, then the broker frozen for
# MQTT_DOWN_SECONDS (600 in BENCHMARKS.md; CI runs 30) and back (scripts/bench/mqtt_monitor.py).
MQTT_DOWN_SECONDS ?= 600
bench-mqtt: deps test-deps venv ## monitor to MQTT: latency, CPU and memory with 200 regions, then a frozen broker (BENCHMARKS.md)
	$(SWIFT) build $(RELEASE_FLAGS) --product ibeacon
	mkdir -p out
	$(PYTHON) scripts/bench/mqtt_monitor.py .build/release/ibeacon 200 $(MQTT_DOWN_SECONDS) 3 | tee out/bench-mqtt.json
