# The two commands of the README.  Each creates .venv when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
JLPM := PATH="$(CURDIR)/$(BIN):$$PATH" $(CURDIR)/$(BIN)/jlpm

.PHONY: demo test lint ext cli-demo bench clean

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

# Main job: JupyterLab rooted here with the quickstart open; the quickstart, the Argus panel, its "Run in kernel" and
# `make cli-demo` share one store, ./argus.duckdb.  Options: `make demo PORT=8899 BROWSER=0` (scripts/demo says more).
PORT ?= 8888
BROWSER ?= 1
demo: $(STAMP)
	PORT=$(PORT) BROWSER=$(BROWSER) scripts/demo $(BIN)

# The command line on the example script, then the stored table read back.
cli-demo: $(STAMP)
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

# Tests: lint + type check + extension build and jest + unit/integration/server/browser tests + notebooks.
test: lint ext $(TEST_STAMP)
	$(BIN)/python -m pytest -q tests
	$(BIN)/python -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider notebooks

bench: $(STAMP)
	$(BIN)/python bench/region_bench.py
	$(BIN)/python bench/plan_bench.py

clean:
	rm -rf $(VENV) argus.duckdb argus.duckdb.lock argus.duckdb.runs extension/node_modules extension/lib argus_lab/labextension
