# Spool: `make run` starts the broker (config/server.properties), `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test postgres lint check-codegen codegen compat bench soak soak-sim clean

# The environment is (re)built when missing or older than pyproject.toml.
.venv: $(STAMP)
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]' --config-settings editable_mode=compat
	@touch $(STAMP)

run: .venv
	$(BIN)/spool broker --config config/server.properties

# Two pytest processes side by side: the Spark and console tiers in one process of their
# own (one JVM and its clusters, one browser; a crash there ends that process and fails the
# run, it cannot stall it), everything else on every core (pytest-xdist, each worker with
# its own session broker). The serial tier's output follows the rest's; the run fails if
# either does. compileall first: each broker process the tests start then reads Spool's
# bytecode instead of compiling ~550 modules (0.6 s of CPU per process where
# PYTHONDONTWRITEBYTECODE is set).
SERIAL_TESTS := tests/spark tests/console
test: .venv postgres
	$(BIN)/ruff check .
	$(BIN)/python -m tools.codegen --check
	$(BIN)/python -m compileall -q -j 0 spool pyspark_spool.py > /dev/null
	@log=$$(mktemp); \
	$(BIN)/python -m pytest -p no:xdist -v $(SERIAL_TESTS) > $$log 2>&1 & serial=$$!; \
	$(BIN)/python -m pytest -n auto $(addprefix --ignore=,$(SERIAL_TESTS)); rest=$$?; \
	wait $$serial; tier=$$?; \
	echo "===== $(SERIAL_TESTS), in one process of their own ====="; cat $$log; rm -f $$log; \
	echo "===== make test: the rest exited $$rest, $(SERIAL_TESTS) exited $$tier ====="; \
	test $$rest -eq 0 -a $$tier -eq 0

# Connect's tests start PostgreSQL servers of their own: Debian's server package, installed
# here where it is missing (as root, or through sudo).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
	  sudo=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq postgresql; }

lint: .venv
	$(BIN)/ruff check .

codegen: .venv
	$(BIN)/python -m tools.codegen

# docs/COMPATIBILITY.md from the handler registry and tools/compat_table/notes.py.
compat: .venv
	$(BIN)/python -m tools.compat_table

bench: .venv
	$(BIN)/python -m pip install --quiet -e '.[dev,spark,bench]' --config-settings editable_mode=compat
	$(BIN)/python -m bench.codec
	$(BIN)/python -m bench.records
	$(BIN)/python -m bench.storage
	$(BIN)/python -m bench.cleaner
	$(BIN)/python -m bench.broker
	$(BIN)/python -m bench.stall
	$(BIN)/python -m bench.tls
	$(BIN)/python -m bench.sasl
	$(BIN)/python -m bench.spark
	$(BIN)/python -m bench.spark_stream
	$(BIN)/python -m bench.replication
	$(BIN)/python -m bench.replication_security
	$(BIN)/python -m bench.authz
	$(BIN)/python -m bench.authz --e2e
	$(BIN)/python -m bench.share_groups
	$(BIN)/python -m bench.embedded
	$(BIN)/python -m bench.cli_startup
	$(BIN)/python -m bench.connect
	$(BIN)/python -m bench.compare
	$(BIN)/python -m bench.scale

# Reliability soak (full counts, ~1 h on 2 cores): rewrites docs/RELIABILITY.md; then the
# API round trip (tests/integration/test_api_roundtrip.py) at 200 requests per API version,
# and 4 ShareConsumers on 100,000 records (SPOOL_SHARE_RECORDS; CI reads 20,000); Connect's
# PostgreSQL -> Spool -> PostgreSQL pipeline through 100,000 changes with the source and the
# sink worker each killed -9 five times (CI: 5,000 changes, twice each).
soak: .venv
	$(BIN)/python -m bench.reliability
	SPOOL_ROUNDTRIP_EXAMPLES=$${SPOOL_ROUNDTRIP_EXAMPLES:-200} \
		$(BIN)/python -m pytest tests/integration/test_api_roundtrip.py -q -p no:randomly
	SPOOL_SHARE_RECORDS=$${SPOOL_SHARE_RECORDS:-100000} \
		$(BIN)/python -m pytest tests/integration/test_share_groups_consumers.py -q -p no:randomly
	SPOOL_SOAK=1 $(BIN)/python -m pytest tests/connect/test_e2e_cdc.py -q -p no:randomly

# The simulators (tests/sim) at soak size: SPOOL_SIM_SEEDS Raft seeds,
# SPOOL_SIM_CONTROLLER_SEEDS with the controller and SPOOL_REPL_SIM_SEEDS of partition
# replication, from SPOOL_SIM_FIRST_SEED (CI runs 10,000, 1,000 and 400 from 0; this goes
# on from there), SPOOL_SIM_DISK_SEEDS on disk logs.
soak-sim: .venv
	SPOOL_SIM_SEEDS=$${SPOOL_SIM_SEEDS:-200000} SPOOL_SIM_FIRST_SEED=$${SPOOL_SIM_FIRST_SEED:-10000} \
	SPOOL_SIM_CONTROLLER_SEEDS=$${SPOOL_SIM_CONTROLLER_SEEDS:-20000} \
	SPOOL_REPL_SIM_SEEDS=$${SPOOL_REPL_SIM_SEEDS:-20000} \
	SPOOL_SIM_DISK_SEEDS=$${SPOOL_SIM_DISK_SEEDS:-2000} \
		$(BIN)/python -m pytest tests/sim -n auto -q -p no:randomly

clean:
	rm -rf $(VENV) build *.egg-info
