# Two entry points: `make demo` and `make test`. Both create .venv and install evalq into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEMO_HOME := $(CURDIR)/.evalq-demo

.PHONY: demo test venv sandbox docker images chromium bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

## bubblewrap and the toolchain rootfs trees it grades in (the same trees the images come from).
sandbox:
	bash scripts/ensure-sandbox.sh
	bash scripts/build-grader-images.sh --rootfs-only

docker: sandbox
	bash scripts/ensure-sandbox.sh --test
	bash scripts/ensure-docker.sh
	bash scripts/build-grader-images.sh

## The compose deployment's images (worker, Redis, PostgreSQL) from local trees: no registry.
images: docker
	bash scripts/build-images.sh

## Headless Chromium for the HTML report's layout test.
chromium:
	bash scripts/ensure-chromium.sh

## Run the demo study on the embedded default (no servers) and print where the report is.
demo: venv sandbox
	rm -rf $(DEMO_HOME)
	cd examples/demo && EVALQ_HOME=$(DEMO_HOME) ../../$(VENV)/bin/evalq run study.toml

## Install everything the tests need (system packages, Docker engine, grader and deployment
## images) and run them all:
## two at a time, a test file to a worker, then the few that touch machine-wide state alone.
TEST_WORKERS ?= 2
test: venv docker images chromium
	export EVALQ_AGENT_PATH="$$(bash scripts/install-test-agents.sh)" && \
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not serial" --basetemp=$(CURDIR)/.pytest-tmp && \
	$(PY) -m pytest -q -m serial --basetemp=$(CURDIR)/.pytest-tmp-serial

bench: venv sandbox
	$(PY) -m bench

clean:
	rm -rf $(VENV) $(DEMO_HOME) .evalq
