# Every target bootstraps .venv on first use. torch is pinned to the CPU build (never an unpinned torch).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-core lint gpu-check clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

# MODEL=smollm2 (or a folder / .gguf file) runs the demo on that model instead of the embedded one.
demo: venv
	$(BIN)/agent-engine demo $(if $(MODEL),--model $(MODEL))

# Lint, the import layers, then every test (core, slow; GPU tests skip without CUDA).
test: lint
	$(BIN)/python -m pytest -q tests

# The fast loop: unit and property tests only.
test-core: venv
	$(BIN)/python -m pytest -q -m core tests

lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo

# On a CUDA machine: the GPU tests and GPU throughput (GPU_PY: a Python whose torch has CUDA).
gpu-check:
	PY=$(or $(GPU_PY),python3) benchmarks/gpu_check.sh

clean:
	rm -rf $(VENV) build *.egg-info
