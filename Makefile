# evalkit: `make eval` runs the default experiment offline; `make test` runs ruff and the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python

.PHONY: eval test lint bench format clean help

help:
	@echo "make eval   - run the default experiment (offline) and write reports/default/report.md"
	@echo "make test   - install dev extras, run ruff and pytest"
	@echo "make bench  - run the benchmarks and print one table"
	@echo "make lint   - ruff check only; make format - ruff format + fix"
	@echo "make clean  - remove runs, caches and the virtualenv"

$(PY):
	$(PYTHON) -m venv $(VENV)

# Stamps make re-installs happen only when pyproject.toml changes. pip compiles nothing: the venv
# is ~680 MB of packages and compiling all of it took 21 s of CPU. Python caches what a process
# imports on first import, except where PYTHONDONTWRITEBYTECODE is set: then every process compiles
# ~1,000 modules again (~5 s). The tests start hundreds of processes, so the dev install compiles
# what they import ahead, once (evalkit.bytecode; it does nothing where the variable is not set).
# `make eval` alone does not: its one process (workers are forked) would save ~5 s and the step
# costs 9-17 s.
PIP_INSTALL = $(PY) -m pip install --quiet --no-compile

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP_INSTALL) -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP_INSTALL) -e '.[dev]'
	$(PY) -m evalkit.bytecode ray pytest xdist hypothesis  # and what the tests and Ray's workers import
	@touch $(VENV)/.installed $@

eval: $(VENV)/.installed
	$(BIN)/evalkit run --report-out reports

test: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/pytest -n auto -q

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

format: $(VENV)/.installed-dev
	$(BIN)/ruff format evalkit tests
	$(BIN)/ruff check --fix .

bench: $(VENV)/.installed
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) runs/*/ .pytest_cache .ruff_cache .hypothesis
