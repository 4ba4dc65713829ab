# libFuzzer over the decoders (RELIABILITY.md). FUZZ_SECONDS per target; with FUZZ_RUNS set, each
# target stops after that many executions (FUZZ_SECONDS stays the cap):
#   make fuzz FUZZ_RUNS=10000000 FUZZ_SECONDS=1800
FUZZ_SECONDS ?= 120
FUZZ_RUNS ?=

.PHONY: fuzz fuzz-ci

fuzz: ## run every fuzz target for FUZZ_SECONDS (default 120) each, or FUZZ_RUNS executions
	FUZZ_RUNS=$(FUZZ_RUNS) Fuzz/run.sh $(FUZZ_SECONDS)

fuzz-ci: ## a short fuzz pass (20 s per target), as CI runs it
	Fuzz/run.sh 20
