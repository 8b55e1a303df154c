# kbench: `make run conf=cpu_smoke`, `make test`, `make lint`. `make install` is implied.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch is on this machine's disk; CUDA machines keep the torch they have.
TORCH_SPEC ?= torch==2.13.0
conf ?= cpu_smoke
# Every other VAR=value given to make (e.g. executor=docker suite.limit=3) becomes a Hydra override.
OVERRIDES := $(filter-out conf=% PYTHON=% VENV=% TORCH_SPEC=% BENCH_OUT=% BENCH_ARGS=%,$(MAKEOVERRIDES))
# Where `make bench` (GPU machine) puts its runs and bench.json; figures go to BENCHMARKS.md.
BENCH_OUT ?= runs/bench
# Options of `python -m runner.bench all` (e.g. BENCH_ARGS="--shards 2 --methods torch_compile").
BENCH_ARGS ?=

.PHONY: install run test lint bench image image-cpu image-lock

$(BIN)/kbench: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(BIN)/kbench

install: $(BIN)/kbench

run: $(BIN)/kbench
	$(BIN)/kbench run experiment=$(conf) $(OVERRIDES)

test: $(BIN)/kbench
	$(BIN)/python -m pytest -q

lint: $(BIN)/kbench
	$(BIN)/ruff check runner tests
	$(BIN)/ruff format --check runner tests

bench: $(BIN)/kbench
	$(BIN)/python -m runner.bench all $(BENCH_OUT) $(BENCH_ARGS)

# Evaluation images (README, "Containers"). `image`: the GPU image (needs Docker Hub and PyPI);
# `image-cpu`: the CPU test image, built offline; `image-lock`: record their ids in manifests/images.lock.
image: $(BIN)/kbench
	PYTHON=$(BIN)/python images/build.sh gpu

image-cpu: $(BIN)/kbench
	PYTHON=$(BIN)/python images/build.sh cpu

image-lock: $(BIN)/kbench
	$(BIN)/python -m runner.executors.image_lock lock
