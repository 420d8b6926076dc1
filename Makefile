# make demo: the main job on its default scenario; make test: every test.
# Both create .venv in the repo root and install what they need.
PY ?= python3
ALLOC ?= dram-preferred
SCALE ?= 1/128
SEEDS ?= 0-2
OUT ?= demo-out
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean traces apidoc

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tierlab compare --machine optane-4tier --scale $(SCALE) \
	  --workloads gups:hotset,graph:pr \
	  --policies static,autonuma-tiering,damon-tiering,idt,oracle \
	  --allocs $(ALLOC) --seeds $(SEEDS) --baseline static --out $(OUT) --force

# the report.html test opens a page in headless Chromium (Debian's chromium): installed
# here where it is missing and apt-get may run; else that test skips, saying why
test: $(STAMP)
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get \
	  >/dev/null && apt-get install -y -q chromium >/dev/null 2>&1; } || \
	  echo "note: chromium is not installed and cannot be here: the report.html test skips"
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# make apidoc: the API reference from the docstrings (pdoc), warnings as errors
apidoc: $(STAMP)
	$(BIN)/python -W error::UserWarning -m pdoc -o build/api tierlab
	@echo "API reference: build/api/index.html"

# make traces: record the real workloads of scripts/traces/ at evaluation size (minutes
# each; Debian packages listed in docs/traces.md) into $TRACES_OUT (default traces-out/).
traces: $(STAMP)
	TIERLAB=$(CURDIR)/$(BIN)/tierlab scripts/traces/record-all.sh --size eval \
	  --out "$${TRACES_OUT:-traces-out}"

clean:
	rm -rf $(VENV) demo-out .pytest_cache build/api
