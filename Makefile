# bodega: `make up` runs a local cluster, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Host commands the cluster and the tests run (ip, nft, nsenter...): the list is in the script.
HOST_PACKAGES := scripts/host-packages

.PHONY: up test lint typecheck unit integration cluster chaos fuzz bench clean host-packages

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

host-packages:
	$(HOST_PACKAGES)

up: $(STAMP) host-packages
	$(BIN)/bodega up $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

integration: $(STAMP) host-packages
	BODEGA_REQUIRE_HAPROXY=1 $(BIN)/pytest -q tests/integration

cluster: $(STAMP) host-packages
	BODEGA_REQUIRE_HAPROXY=1 $(BIN)/pytest -q tests/cluster

# A chaos campaign on five hosts joined with the CLI, then its table (root: namespaces,
# nftables, tmpfs). ARGS="--scenarios" runs the one-fault scenarios instead.
chaos: $(STAMP) host-packages
	$(BIN)/python -m tests.cluster.chaos $(ARGS)

# Test files run in TEST_PROCESSES processes at once (most of a cluster test is waiting);
# each cluster takes a machine range of its own (tests/cidr_kit.py). TEST_PROCESSES=0: one.
# The slowest tests are listed at the end, to keep the whole run well under 20 minutes.
TEST_PROCESSES ?= 3
test: host-packages lint typecheck
	BODEGA_REQUIRE_HAPROXY=1 $(BIN)/pytest -q -n $(TEST_PROCESSES) --dist loadfile \
		--durations=30 --durations-min=10 tests

# The full API fuzz: 80 cases per operation and generation mode from each OpenAPI
# document (over 13,000), plus the free-form and bad-input tests; prints the totals.
FUZZ_EXAMPLES ?= 80
fuzz: $(STAMP)
	PYTHONPATH=. BODEGA_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q \
		-p tests.integration.broker.fuzz_report_kit tests/integration/broker/test_fuzz*.py

# The headline benches, each a few minutes on a `bodega up` of its own, then one table:
# figure, bodega, peer, ratio (bench/headline.py; ARGS="--only machines,proxy" for some).
# Every bench also runs alone, at full size: docs/benchmarks.md.
bench: $(STAMP) host-packages
	$(BIN)/python -m bench.headline $(ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build src/*.egg-info
