#!/usr/bin/env bash
# The prepared device check for a lent single GPU (an H200: no internet, torch + transformers preinstalled,
# at most 64 MiB carried). Run from the repository root; results land in $OUT (default ./device_check_out):
#   bash bench/device_check.sh            # about 10-14 minutes; each part has its own time limit
# Parts (bench/device_check.py has the details), each in its own process so one failure or hang
# costs only its own budget:
#   probe     CUDA, bf16, and which of TE, Megatron-Core, flash-attn, vLLM, TRL, datasets, NeMo-RL import
#   rate      requests/s of one vLLM engine (Qwen3-8B shape, dummy weights; 3k-token prompts, 256 new tokens):
#             generation.engine_rate of the cluster layout (HF on the 0.6B shape when vLLM is missing, flagged)
#   rate-invariant  the same with VLLM_BATCH_INVARIANT=1 (generation.vllm.batch_invariant): what it costs
#   hf        fwd+bwd of a random Qwen3-0.6B-shaped model in bf16 (transformers): tokens/s, MFU, peak memory
#   act       ACT GRPO steps of the local engine (TRL) on that shape in bf16: step time, tokens/s, peak memory
#   megatron  fwd+bwd of the same shape as a Megatron-Core GPTModel (TE layers if TE imports): tokens/s, MFU
# A part whose packages are missing is reported as skipped with the reason. The local engine needs TRL,
# datasets, omegaconf, pydantic and rich: if the device lacks them, put their wheels in ./wheels (where
# there is PyPI: `python -m pip download --no-deps -d wheels trl accelerate datasets ...` for the device's
# Python) and carry that folder; they are installed from it with --no-index.
# Without a GPU this script is only checked: `bash -n` and the parts' --smoke runs (tests/test_device_check.py).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/device_check_out}
PY=${PYTHON:-python}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi: not available" > "$OUT/nvidia-smi.txt"
head -n 15 "$OUT/nvidia-smi.txt"

if [[ -d wheels ]] && ! "$PY" -c "import trl, datasets, omegaconf, pydantic, rich" 2>/dev/null; then
  "$PY" -m pip install --quiet --no-index --find-links wheels --no-deps wheels/*.whl > "$OUT/wheels.log" 2>&1 ||
    echo "wheels: install failed (see $OUT/wheels.log)"
fi

part() {  # part NAME SECONDS [ARGS...]
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s)"
  timeout "$limit" "$PY" bench/device_check.py "$name" --out "$OUT" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 3 "$OUT/$name.log"
  if (( rc != 0 )); then echo "== $name: exit $rc (log: $OUT/$name.log)"; fi
}

part probe 90
part rate 240 --requests 256 --prompt-tokens 3000 --completion 256
part rate-invariant 240 --requests 256 --prompt-tokens 3000 --completion 256
part hf 150 --steps 5 --batch 4 --seq 4096
part act 240 --steps 3 --completion 256
part megatron 150 --steps 5 --batch 4 --seq 4096
"$PY" bench/device_check.py summary --out "$OUT" | tee "$OUT/summary.md"
