# Every target bootstraps .venv on first use. torch is pinned to the CPU build on local disk.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-fast lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

demo: venv
	$(BIN)/agent-engine demo

test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q tests

test-fast: venv
	$(BIN)/python -m pytest -q -m "not slow" tests

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
