# The README's two commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup services run test test-fast lint bench clean

$(BIN)/cronos: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "setup: Cronos needs Python 3.11 or newer as '$(PYTHON)': install it (Debian/Ubuntu: apt-get install python3 python3-venv) or run make PYTHON=python3.12 ..." >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/cronos

setup: $(BIN)/cronos

services:
	./scripts/services.sh

# A working cluster: PostgreSQL and Redis answering (already, or started with docker compose, or
# started locally; scripts/services.sh), then migrate and API + dispatcher + executor.
# Services first: on a machine without them, one line says what to install before any set-up.
run: services setup
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
