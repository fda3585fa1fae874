# The two commands a new user types: `make run` (the app) and `make test` (the suite).
# Each creates or reuses .venv and installs what it needs first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CHROMIUM := /usr/bin/chromium

.PHONY: run serve test test-fast test-loaded bench mutate mutate-sample clean check-runtime

run: $(VENV)/.runtime
	$(BIN)/streamlit run streamlit_app.py

# The app as a class server runs it (app/serve.py): headless, ADDRESS:PORT from the environment (0.0.0.0:8501),
# no file watcher; heavy-job limits from EXPLORER_* variables or SERVE_ARGS, e.g. SERVE_ARGS='--jobs 1 --max-steps 200'.
serve: $(VENV)/.runtime
	$(BIN)/python -m app.serve $(SERVE_ARGS)

# pytest-xdist: TEST_JOBS workers (default: one per core), work stealing (a worker that runs dry takes half of
# another's queue: the long browser and subprocess tests do not leave one core idle at the end). `make test-fast`:
# the inner loop, engine tests only (`-m engine`: no app, no browser, no timing, no subprocess) and not the `slow`
# ones (the explicit-attention and single-knob halves of the variant grids, the full products of the core knobs).
TEST_JOBS ?= auto
test: $(VENV)/.dev system-deps
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal $(PYTEST_ARGS)

test-fast: $(VENV)/.dev
	$(BIN)/python -m pytest -n $(TEST_JOBS) -m "engine and not slow" $(PYTEST_ARGS)

# The whole suite with the browser tests required, beside one CPU-burning process per core (.ci/loaded-run).
test-loaded:
	.ci/loaded-run

# The app with requirements.txt alone, in a venv of its own (the dev requirements bring packages of their own and
# would hide a runtime import missing from requirements.txt): import every module, run every page (AppTest).
RUNTIME_VENV := .venv-runtime
check-runtime: $(RUNTIME_VENV)/.runtime
	$(RUNTIME_VENV)/bin/python tests/runtime_smoke.py

$(RUNTIME_VENV)/.runtime: requirements.txt
	$(PYTHON) -m venv $(RUNTIME_VENV)
	$(RUNTIME_VENV)/bin/python -m pip install -q -r requirements.txt
	touch $@

bench: $(VENV)/.dev
	$(BIN)/python -m bench

# Mutation testing (not part of `make test`): mutmut mutates engine/layers, budget, interop, train and plan (see
# [tool.mutmut] in pyproject.toml for the fast engine tests it runs) and bench/mutation-full.txt gets the score and
# the survivors: every mutant, hours on two cores (`make mutate-sample` below estimates the score in well under
# one). MUTANTS narrows the run to name globs, e.g. MUTANTS='engine.budget.*'; MUTATE_JOBS sets the workers.
# One OpenMP thread: mutmut forks a child per mutant from a process that has run torch, and a forked child of a
# multi-threaded OpenMP pool waits forever on a lock no thread holds (seen: every such mutant a bogus "timeout").
# MUTATE_MINUTES stops the run after that long (SIGTERM; mutmut ignores SIGINT while children run, and it saves
# each verdict as it comes) and still writes the score of what was checked; the next `make mutate` resumes with
# the mutants not checked yet.
MUTATE_JOBS ?= 2
MUTANTS ?=
MUTATE_MINUTES ?=
mutate: $(VENV)/.dev requirements-mutate.txt
	$(BIN)/python -m pip install -q -r requirements-mutate.txt
	-OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(if $(MUTATE_MINUTES),timeout $(MUTATE_MINUTES)m) \
		$(BIN)/mutmut run --max-children $(MUTATE_JOBS) $(MUTANTS)
	$(BIN)/python -m bench.mutation_score | tee bench/mutation-full.txt

# The score of a seeded stratified sample (bench/mutation_run.py): SAMPLE mutants (default 400), at least 10 per
# module, each run against the tests that call its function; score, Wilson interval, seed and the missed mutants
# go to bench/mutation.txt. SEED=N draws that sample again (default: a new seed, printed); MUTATE_MINUTES starts
# no mutant after that long (the rest are reported as not checked).
SAMPLE ?= 400
SEED ?=
mutate-sample: $(VENV)/.dev requirements-mutate.txt
	$(BIN)/python -m pip install -q -r requirements-mutate.txt
	$(BIN)/python -m bench.mutation_run --n $(SAMPLE) --jobs $(MUTATE_JOBS) $(if $(SEED),--seed $(SEED)) \
		$(if $(MUTATE_MINUTES),--minutes $(MUTATE_MINUTES))

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	touch $@

# Debian's Chromium for the real-browser tests and Graphviz's `dot` for the handout's diagram; installed only
# when missing and we are root (elsewhere those tests skip and say why).
.PHONY: system-deps
system-deps:
	@missing=""; [ -x $(CHROMIUM) ] || missing="chromium"; command -v dot >/dev/null || missing="$$missing graphviz"; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian packages:$$missing"; \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing) >/tmp/system-deps.log 2>&1 \
			|| echo "could not install$$missing (see /tmp/system-deps.log); the tests that need them will skip"; \
	fi

clean:
	rm -rf $(VENV) $(RUNTIME_VENV) .pytest_cache mutants
