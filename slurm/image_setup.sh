# shellcheck shell=bash
# Adds what nemo-act's jobs need to the NeMo-RL release image, once, on a node with internet and of the
# architecture the jobs run on (slurm/build_image.sub saves the result as a squashfs; docker/Dockerfile
# runs the same for sites that build with docker or podman). Jobs then install nothing.
#
# What the release image lacks (NeMo-RL v0.7.0 docker/Dockerfile, tag commit 81aa43dd):
# 1. a JRE: its apt step installs jq, curl, git, rsync, wget, less, vim, Nsight; ScienceWorld runs on Java;
# 2. the simulators (slurm/image-requirements.txt), into the two Pythons that import them: the image's
#    default one (/opt/nemo_rl_venv: the pipeline, which plays experts) and NeMo-RL's vLLM worker venv
#    (evaluation generates with vLLM and steps the env in the same process tree). Every package already in
#    a venv is pinned as it is (pip freeze -> constraints), so NeMo-RL's own versions never move.
# ALFWorld on aarch64 (GH200): textworld has no aarch64 wheel and fast-downward-textworld is sdist-only
# (tools/check_wheels.py prints the table); both are built here from source (a C++ toolchain and CMake are in
# the release image; textworld's build downloads Inform7, so it needs this node's internet). If that build
# fails, the image is written without ALFWorld, /opt/nemo-act-image.txt says so, and an ALFWorld job's
# preflight (nemo-act cluster-check) stops with the way round: ALFWorld's env-bound steps on x86 nodes
# (slurm/env_steps.sub). ScienceWorld is a pure-Python wheel plus a jar: any architecture.
#
# The CPU twin of the image (`make test-cluster`, tools/cluster_twin/README.md) runs this same script on its
# venv: NEMO_ACT_IMAGE_PYTHONS names the Pythons to set up (default: the image's two), NEMO_ACT_IMAGE_APT=0
# skips the JRE (the twin's machine has Java already).
set -euo pipefail
REPO=${NEMO_ACT_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ARCH=$(uname -m)
BASE_PY=${UV_PROJECT_ENVIRONMENT:-/opt/nemo_rl_venv}/bin/python
VLLM_PY=${NEMO_RL_VENV_DIR:-/opt/ray_venvs}/nemo_rl.models.generation.vllm.vllm_worker.VllmGenerationWorker/bin/python
read -r -a PYTHONS <<< "${NEMO_ACT_IMAGE_PYTHONS:-$BASE_PY $VLLM_PY}"
REPORT=${NEMO_ACT_IMAGE_REPORT:-/opt/nemo-act-image.txt}

echo "nemo-act image setup on $ARCH: JRE + simulators into ${PYTHONS[*]}"
if [[ "${NEMO_ACT_IMAGE_APT:-1}" == 1 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends openjdk-17-jre-headless
  rm -rf /var/lib/apt/lists/*
fi
java -version

pip_install() {  # pip_install PYTHON ARGS... with the venv's own packages pinned as they are
  local py=$1 constraints
  shift
  constraints=$(mktemp)
  "$py" -m pip freeze --exclude-editable > "$constraints"
  "$py" -m pip install --no-cache-dir --constraint "$constraints" "$@"
}

mapfile -t PACKAGES < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$REPO/slurm/image-requirements.txt")
status=()
for py in "${PYTHONS[@]}"; do
  for pkg in "${PACKAGES[@]}"; do
    pkg=${pkg//[[:space:]]/}
    if [[ $pkg == alfworld* && $ARCH == aarch64 ]]; then
      # no wheels for textworld / fast-downward-textworld here: build them from source
      if pip_install "$py" --no-binary textworld,fast-downward-textworld "$pkg"; then
        status+=("$py $pkg built from source")
      else
        echo "[WARN] ALFWorld did not build on $ARCH for $py: run ALFWorld's env-bound steps on x86 (slurm/env_steps.sub)" >&2
        status+=("$py $pkg MISSING (build failed on $ARCH)")
      fi
      continue
    fi
    pip_install "$py" "$pkg"
    status+=("$py $pkg installed")
  done
done

{
  echo "nemo-act image for $ARCH, built $(date -u +%Y-%m-%dT%H:%M:%SZ) from ${NEMO_RL_COMMIT:-the NeMo-RL release image}"
  java -version 2>&1 | head -n 1
  printf '%s\n' "${status[@]}"
} > "$REPORT"
cat "$REPORT"
