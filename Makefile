# The README's two commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make run TASKS=myapp.tasks,myapp.reports`: the modules whose @cronos.task functions the executor
# loads (found in this folder, or on PYTHONPATH).
TASKS ?= cronos.example_tasks
comma := ,

.PHONY: setup services run test test-long test-fast lint bench clean image-start

$(BIN)/cronos: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "setup: Cronos needs Python 3.11 or newer as '$(PYTHON)': install it (Debian/Ubuntu: apt-get install python3 python3-venv) or run make PYTHON=python3.12 ..." >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(BIN)/cronos

# The test toolchain (pytest, ruff, mypy, browsers' driver...): for `make test` and `make lint` only.
$(VENV)/.test-extras: $(BIN)/cronos
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(VENV)/.test-extras

services:
	./scripts/services.sh

# A working cluster: PostgreSQL and Redis answering (already, or started with docker compose, or
# started locally; scripts/services.sh), then migrate and API + dispatcher + executor.
# Services first: on a machine without them, one line says what to install before any set-up.
# The runtime only (pip install -e .): the test toolchain is `make setup`'s.
run: services $(BIN)/cronos
	@$(BIN)/python scripts/run_banner.py $(subst $(comma), ,$(TASKS))
	$(BIN)/cronos dev $(foreach module,$(subst $(comma), ,$(TASKS)),--import $(module))

# Lint, types, import contracts, then the whole test suite against real PostgreSQL and Redis.
# The container image starts building first, in the background (tests/deploy/image.py): the CPU is
# mostly idle through the suite, and tests/deploy/test_image.py waits for it.
# Three groups (docs/development.md, tests/conftest.py): the tests that own their database and key
# prefix on TEST_WORKERS processes at once (pytest-xdist), then the `paired` process tests two at a
# time, then the `serial` ones one at a time. Every group runs even when one fails, so one run shows
# every failure. Soaks and big benchmarks (`long`) are test-long's.
TEST_WORKERS ?= 2
PAIRED_WORKERS ?= 2
test: setup services image-start lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not serial and not paired and not long" --dist worksteal --durations=20; parallel=$$?; \
	$(BIN)/python -m pytest -q -n $(PAIRED_WORKERS) -m "paired and not long" --dist worksteal --durations=20; paired=$$?; \
	$(BIN)/python -m pytest -q -m "serial and not long" --durations=20; serial=$$?; \
	test $$parallel -eq 0 -a $$paired -eq 0 -a $$serial -eq 0

# What make test leaves out: soaks and big benchmarks (tests/conftest.py: LONG_TESTS), one at a time.
test-long: setup services
	$(BIN)/python -m pytest -q -m long --durations=20

test-fast: setup services
	$(BIN)/python -m pytest -q -m "not cluster"

image-start: setup
	$(BIN)/python -m tests.deploy.image start

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) *.egg-info
