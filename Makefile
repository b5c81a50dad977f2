# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV   ?= .venv
# CPU wheel on machines without a GPU; on a GPU box: make TORCH='torch==2.13.0 --index-url ...' setup
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUNENV := HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
THREADS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup test test-fast lint demo clean test-megatron

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned in the same command so no other (CUDA) build is pulled in by a dependency;
	# the venv's bin leads PATH because alfworld's fast-downward build calls a bare `python`
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pip install --quiet $(TORCH) -e '.[local,envs,cluster,dev]'
	touch $@

setup: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check nemo_act tests benchmarks tools tests_megatron
	$(BIN)/ruff format --check nemo_act tests benchmarks tools tests_megatron
	$(BIN)/shellcheck -x -s bash slurm/*.sub slurm/_*.sh slurm/image_setup.sh slurm/cluster.env.example benchmarks/device_check.sh

test: lint
	OMP_NUM_THREADS=1 $(RUNENV) $(BIN)/python -m pytest

# The pure-logic lane (no JVM, no benchmark data, no trained model; ~1.5 min): tests marked heavy are left out
test-fast: $(STAMP)
	OMP_NUM_THREADS=1 $(RUNENV) $(BIN)/python -m pytest -m "not heavy" -q

# Converters (tools/convert): a separate Python 3.12 venv with Megatron-Core + Megatron-Bridge.
PYTHON312 ?= $(shell PYENV_VERSION=3.12.1 python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null || command -v python3.12)
MVENV  := .venv-megatron
MSTAMP := $(MVENV)/.installed

$(MSTAMP): tools/convert/requirements.txt tools/convert/requirements-nodeps.txt
	$(PYTHON312) -m venv $(MVENV)
	$(MVENV)/bin/python -m pip install --quiet --upgrade pip
	$(MVENV)/bin/python -m pip install --quiet -r tools/convert/requirements.txt
	$(MVENV)/bin/python -m pip install --quiet --no-deps -r tools/convert/requirements-nodeps.txt
	touch $@

test-megatron: $(MSTAMP)
	OMP_NUM_THREADS=1 $(RUNENV) $(MVENV)/bin/python -m pytest -p no:cacheprovider tests_megatron

demo: $(STAMP)
	OMP_NUM_THREADS=$(THREADS) $(RUNENV) $(BIN)/nemo-act demo --out runs/demo

clean:
	rm -rf runs .pytest_cache .ruff_cache
