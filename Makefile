# The README's two commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup services run test test-fast lint bench clean

$(BIN)/cronos: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/cronos

setup: $(BIN)/cronos

services:
	./scripts/services.sh

# A working cluster on the local PostgreSQL and Redis: migrate, then API + dispatcher + executor.
run: setup services
	$(BIN)/cronos dev --import cronos.example_tasks

# Lint, types, import contracts, then the whole test suite against real PostgreSQL and Redis.
test: setup services lint
	$(BIN)/python -m pytest -q

test-fast: setup services
	$(BIN)/python -m pytest -q -m "not cluster"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) *.egg-info
