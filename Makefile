# The README's two commands are `make serve` and `make test`; everything they need is set up here.
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
UV_VERSION := 0.13.9
HOST ?= 127.0.0.1
PORT ?= 8000
DATA_DIR ?= ./data

.PHONY: setup serve local test test-fast test-localstack lint format bench-ingest bench-compaction bench-influx layers layers-check synth clickbench clean

NATIVE_LIBRARY := src/arcs/native/_arcs_native.so

setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"
	@$(UV) sync --all-extras --frozen --quiet
	@$(MAKE) --no-print-directory --quiet $(NATIVE_LIBRARY)

# arcs.native's C library for this machine (Zig's compiler, from uv.lock); rebuilt when its sources change.
$(NATIVE_LIBRARY): $(wildcard src/arcs/native/*.c src/arcs/native/*.h) layers/native.py
	@$(UV) run --no-sync python -m layers.native >/dev/null

serve: setup
	$(UV) run arcs serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

local: setup
	$(UV) run arcs local --host $(HOST) --port $(PORT)

lint: setup
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy

format: setup
	$(UV) run ruff format .
	$(UV) run ruff check --fix .

test: lint
	$(UV) run pytest

# The loop to run after every change: lint and types, then the unit and functional tests on one
# worker per core, without those marked slow (`make test` runs them), the 15 slowest listed.
# Compiled bytecode is kept even where the environment turns it off: each worker and each Python
# the tests start would otherwise compile every module again (about 10 s of CPU each). Temporary
# files go to a RAM disk where there is one: on a busy disk the local store's and SQLite's fsyncs
# are most of the functional tests' time (`make test` keeps them on disk).
# Measured on 2 cores: pytest 2 min 16 s for 2,670 tests on a quiet machine, 3 min 19 s in all
# (lint and types included) with other work beside it (load average about 5).
FAST_TMPDIR := $(if $(wildcard /dev/shm/.),/dev/shm,$(TMPDIR))
test-fast: lint
	env -u PYTHONDONTWRITEBYTECODE TMPDIR=$(FAST_TMPDIR) $(UV) run pytest tests/unit tests/functional -m "not slow" -n auto --dist worksteal --durations=15 -q

# The end-to-end suite through arcs local on LocalStack's S3 and SQS in host mode, without Docker (docs/localstack.md).
test-localstack: setup
	$(UV) run python -m tests.localstack.run -q

bench-ingest: setup
	$(UV) run python -m benchmarks.ingest

# Lambda layers from uv.lock into layers/build/<arch>/ (ARCH=arm64|x86_64; see layers/README.md).
ARCH ?= arm64
layers: setup
	$(UV) run python -m layers.build --arch $(ARCH)

# Both architectures built, size-checked and smoke-tested: this machine's natively, the other under
# qemu where it can (layers/README.md); what could not run is printed as such.
layers-check: setup
	$(UV) run python -m layers.build --arch arm64
	$(UV) run python -m layers.build --arch x86_64
	$(UV) run python -m layers.check --arch arm64 --arch x86_64 --smoke

# The CloudFormation template into cdk.out, offline (with the CDK CLI: cdk synth -c key=value).
synth: setup
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(UV) run python -m infra.app
bench-compaction: setup
	$(UV) run python -m benchmarks.compaction

# InfluxDB 1.x (Debian's influxdb package, installed here if missing) beside arcs serve: the same
# line-protocol points and clients, ingest and dashboard queries (benchmarks/influx_peer.py).
INFLUX_POINTS ?= 5000000
bench-influx: setup
	@command -v influxd >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq influxdb >/dev/null; }
	$(UV) run python -m benchmarks.influx_peer --points $(INFLUX_POINTS)

# ClickBench on this machine: our query path against DuckDB, chDB and DataFusion (clickbench/README.md).
CLICKBENCH_ROWS ?= 1000000
clickbench: setup
	$(UV) run python -m clickbench.harness --rows $(CLICKBENCH_ROWS)

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache cdk.out layers/build
