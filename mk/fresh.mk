# `make test` on a machine that has nothing but what the README says (issue 29): a clean Debian 12
# root from the Debian-root toolkit (scripts/debian/root.sh, mmdebstrap; cached in $(FRESH_CACHE)), the Swift toolchain from /opt/swift
# (read-only) and git. As a user, `make test` must print the one `apt-get install` to run and
# build nothing; as root it must install what it needs and pass (~25 min). Root only.
#   make test-fresh                        both (the committed HEAD is what is tested)
#   make test-fresh-user                   only the user's message (seconds, once the root is cached)
#   make test-fresh FRESH_TARGET=unit      as root, the unit suite only
FRESH_CACHE ?= /var/cache/ibeacon-fresh
FRESH_TARGET ?= test

.PHONY: test-fresh test-fresh-user print-test-packages

test-fresh: ## make test on a clean Debian 12 root (mmdebstrap): as a user (the apt-get message), then as root
	FRESH_CACHE=$(FRESH_CACHE) scripts/fresh/run.sh $(FRESH_TARGET)

test-fresh-user: ## as a user on a clean Debian 12 root: make test names the apt-get install and builds nothing
	FRESH_CACHE=$(FRESH_CACHE) scripts/fresh/run.sh --user-only

print-test-packages:
	@echo $(APT_PACKAGES) $(TEST_APT_PACKAGES) $(VENV_APT_PACKAGES)
