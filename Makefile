# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV   ?= .venv
# CPU wheel on machines without a GPU; on a GPU box: make TORCH='torch==2.13.0 --index-url ...' setup
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUNENV := HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
THREADS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup test lint demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned in the same command so no other (CUDA) build is pulled in by a dependency;
	# the venv's bin leads PATH because alfworld's fast-downward build calls a bare `python`
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pip install --quiet $(TORCH) -e '.[local,envs,cluster,dev]'
	touch $@

setup: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check nemo_act tests benchmarks tools
	$(BIN)/ruff format --check nemo_act tests benchmarks tools
	$(BIN)/shellcheck -x -s bash slurm/*.sub slurm/_act_job.sh slurm/cluster.env.example

test: lint
	OMP_NUM_THREADS=1 $(RUNENV) $(BIN)/python -m pytest

demo: $(STAMP)
	OMP_NUM_THREADS=$(THREADS) $(RUNENV) $(BIN)/nemo-act demo --out runs/demo

clean:
	rm -rf runs .pytest_cache .ruff_cache
