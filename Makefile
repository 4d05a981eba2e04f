# evalkit: `make eval` runs the default experiment offline; `make test` runs ruff and the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python

.PHONY: eval test test-fast lint bench format clean help

help:
	@echo "make eval   - run the default experiment (offline) and write reports/default/report.md"
	@echo "make test   - install dev extras, run ruff, the import contracts and every test"
	@echo "make test-fast - ruff, import contracts, unit and contract tests (no whole runs, no servers)"
	@echo "make bench  - run the benchmarks and print one table (REF=<commit>: side by side with it)"
	@echo "make lint   - ruff check only; make format - ruff format + fix"
	@echo "make clean  - remove runs, caches and the virtualenv"

$(PY):
	$(PYTHON) -m venv $(VENV)

# Stamps make re-installs happen only when pyproject.toml changes. Python caches what a process
# imports on first import, except where PYTHONDONTWRITEBYTECODE is set: then every process compiles
# its modules again. The tests start hundreds of processes, so the dev install compiles the
# installed packages once, and only where that variable is set (elsewhere Python's own cache does it).
PIP_INSTALL = $(PY) -m pip install --quiet --no-compile
SITE = $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP_INSTALL) -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP_INSTALL) -e '.[dev]'
	@if [ -n "$$PYTHONDONTWRITEBYTECODE" ]; then PYTHONDONTWRITEBYTECODE= $(PY) -m compileall -q -j 0 evalkit $(SITE); fi
	@touch $(VENV)/.installed $@

eval: $(VENV)/.installed
	$(BIN)/evalkit run --report-out reports

# Every test runs under a timeout (pyproject: [tool.pytest.ini_options] timeout) and the suite fails
# if it changed the checkout (tests/conftest.py). test-fast leaves out the tests marked `whole`
# (pipeline runs, servers, CLI subprocesses, Ray).
# The tests start hundreds of `python -m evalkit` processes: where PYTHONDONTWRITEBYTECODE is set,
# every module edited since the install would be compiled again in each of them, so the sources are
# compiled once first (compileall skips what is up to date). --dist loadgroup hands each test to
# whichever worker is free, keeping the tests that share a costly fixture together (tests/conftest.py).
COMPILE_SOURCES = @if [ -n "$$PYTHONDONTWRITEBYTECODE" ]; then PYTHONDONTWRITEBYTECODE= $(PY) -m compileall -q -j 0 evalkit tests; fi
# PYTEST_ARGS: more pytest options, e.g. make test PYTEST_ARGS=--durations=30
PYTEST_ARGS ?=
PYTEST_XDIST = $(BIN)/pytest -n auto --dist loadgroup -q $(PYTEST_ARGS)

test: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(COMPILE_SOURCES)
	$(PYTEST_XDIST)

test-fast: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(COMPILE_SOURCES)
	$(PYTEST_XDIST) -m "not whole"

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

format: $(VENV)/.installed-dev
	$(BIN)/ruff format evalkit tests
	$(BIN)/ruff check --fix .

# REF=<commit>: the default run side by side with that commit (benchmarks/reference.py);
# BENCH_ARGS e.g. "--sessions 4 --reps 1", "--tests", "--only stages".
bench: $(VENV)/.installed
	$(PY) -m benchmarks $(if $(REF),--ref $(REF)) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) runs/*/ .pytest_cache .ruff_cache .hypothesis
