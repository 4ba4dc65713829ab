# libFuzzer over the decoders (RELIABILITY.md). FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 120

.PHONY: fuzz fuzz-ci

fuzz: ## run every fuzz target for FUZZ_SECONDS (default 120) each
	Fuzz/run.sh $(FUZZ_SECONDS)

fuzz-ci: ## a short fuzz pass (20 s per target), as CI runs it
	Fuzz/run.sh 20
