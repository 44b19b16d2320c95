# Tickwheel: the two commands that matter are `make dev` and `make test`.
# Everything else is a step they call.

PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PYTHON  := $(BIN)/python
STAMP   := $(VENV)/.installed
LINT    := src tests benchmarks scripts/gen-proto

.DEFAULT_GOAL := help

.PHONY: help dev test deps venv build build-dev proto proto-check lint fmt typecheck unit integration acceptance fuzz bench annotate clean

help:
	@echo "make dev          - set up and run Tickwheel on its embedded default (SQLite, no servers)"
	@echo "make test         - set up everything (system servers included) and run every gate and test"
	@echo ""
	@echo "make build        - create .venv and build the Cython extensions (what dev and test start with)"
	@echo "make unit         - the unit tests (no servers)"
	@echo "make integration  - the integration tests (servers started by the harness)"
	@echo "make acceptance   - the acceptance tests (real tickwheel processes)"
	@echo "make lint         - ruff check and ruff format --check (make fmt fixes); make typecheck: mypy"
	@echo "make fuzz         - the fuzzers with FUZZ_EXAMPLES examples each (default $(FUZZ_EXAMPLES))"
	@echo "make bench        - the benchmarks (pytest-benchmark); one file: make bench BENCH=benchmarks/test_wheel.py"
	@echo "make proto        - regenerate src/scheduler/_proto and sdk/typescript/src/gen from proto/ (proto-check: is it current?)"
	@echo "make clean        - remove build output, built extensions and caches (not .venv)"

## Set-up ------------------------------------------------------------------

deps:
	@scripts/install-deps

# A Debian python3 without ensurepip cannot make a venv: install python3-venv, try again.
$(PYTHON):
	$(PY) -m venv $(VENV) || { rm -rf $(VENV) && scripts/install-deps venv && $(PY) -m venv $(VENV); }
	$(BIN)/pip install -q --upgrade pip

# The editable install never fails for want of a C compiler: an extension it cannot
# compile is skipped with a warning (setup.py, TICKWHEEL_OPTIONAL_EXTENSIONS).
$(STAMP): $(PYTHON) pyproject.toml setup.py
	$(BIN)/pip install -q "setuptools>=77" wheel "cython>=3.0"
	TICKWHEEL_OPTIONAL_EXTENSIONS=1 $(BIN)/pip install -q --no-build-isolation -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# The extension is built in place so the editable install imports it. `build` needs a C
# compiler (make test proves the extensions load); `build-dev` falls back to the
# pure-Python twins with a warning, and the dev banner says which runs.
build: venv
	$(PYTHON) setup.py -q build_ext --inplace

build-dev: venv
	TICKWHEEL_OPTIONAL_EXTENSIONS=1 $(PYTHON) setup.py -q build_ext --inplace

annotate: venv
	TICKWHEEL_CYTHON_ANNOTATE=1 TICKWHEEL_CYTHON_FORCE=1 $(PYTHON) setup.py -q build_ext --inplace
	@echo "annotated HTML: src/_wheel/_wheel_c.html"

## Protos (generated code is committed; `proto-check` proves it is current) --

proto: venv
	$(PYTHON) scripts/gen-proto
	@# The TypeScript SDK's generated code follows the same proto (its drift check runs in make test).
	@if command -v npm >/dev/null 2>&1; then \
		cd sdk/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund --silent; } && npm run --silent generate; \
	else echo "npm not found: sdk/typescript not regenerated (run npm run generate there)"; fi

proto-check: venv
	$(PYTHON) scripts/gen-proto --check

## Gates ---------------------------------------------------------------------

lint: venv
	$(BIN)/ruff check $(LINT)
	$(BIN)/ruff format --check $(LINT)

fmt: venv
	$(BIN)/ruff check --fix $(LINT)
	$(BIN)/ruff format $(LINT)

typecheck: venv
	$(BIN)/mypy

test: deps build proto-check lint typecheck
	$(BIN)/pytest -p no:cacheprovider --timeout=300 tests

unit: build
	$(BIN)/pytest tests/unit

integration: deps build
	$(BIN)/pytest tests/integration

acceptance: deps build
	$(BIN)/pytest tests/acceptance

# The fuzzers with many more examples per RPC than `make test` runs (500).
FUZZ_EXAMPLES ?= 5000
fuzz: deps build
	TICKWHEEL_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -p no:cacheprovider --timeout=0 tests/fuzz

# BENCH: a benchmark file or node id (default: all of benchmarks/).
BENCH ?= benchmarks
bench: deps build
	$(BIN)/pytest $(BENCH) --benchmark-only --benchmark-columns=min,median,mean,max,ops --timeout=1800 -p no:cacheprovider

## Running -------------------------------------------------------------------

# The embedded default needs no system server: only the venv and the wheel.
dev: build-dev
	$(BIN)/tickwheel dev --demo

clean:
	rm -rf build dist src/*.egg-info src/_wheel/*.so src/_wheel/*.c src/_wheel/*.html \
		src/scheduler/*.so src/scheduler/*.c src/scheduler/*.html \
		src/scheduler/server/*.so src/scheduler/server/*.c src/scheduler/server/*.html \
		src/scheduler/client/*.so src/scheduler/client/*.c src/scheduler/client/*.html \
		src/scheduler/worker/*.so src/scheduler/worker/*.c src/scheduler/worker/*.html \
		.pytest_cache .mypy_cache .ruff_cache
