r"""Peak host memory of the Megatron -> HF export, per parameter (run with the Megatron venv's Python).

    .venv-megatron/bin/python bench/export_memory.py [--layers 4 28] [--out DIR]

For each size it builds a random Qwen3 (hidden 512, 8 / 4 heads of 64, FFN 1536, vocabulary 32,000;
``--layers`` decoder layers), saves it as HF safetensors in 50 MB shards (as real checkpoints come in
~5 GB shards), writes a bf16 Megatron checkpoint at TP=2 (what a bf16 training job saves), then runs the
export exactly as the cluster engine does (``tools/convert/megatron_to_hf.py --device cpu --no-verify``)
in a fresh process and reads the peak resident memory of its rank process (``getrusage(RUSAGE_CHILDREN)``
of a wrapper: the largest descendant). The slope between two sizes is the memory the export needs per
parameter; the intercept is the fixed cost (Python, torch, Megatron imports). It prints a table with the
extrapolation to 8B and 32B parameters and writes ``export_memory.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONVERT = REPO / "tools" / "convert"

_WRAPPER = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:]).returncode
print("PEAK_KB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)
sys.exit(rc)
"""


def _model(folder: Path, layers: int) -> int:
    """Save a random Qwen3 with ``layers`` layers to ``folder`` (bf16, 50 MB shards); return its parameter count."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    sys.path.insert(0, str(REPO / "tests_megatron"))
    from conftest import save_tokenizer

    cfg = Qwen3Config(
        vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=layers, num_attention_heads=8,
        num_key_value_heads=4, head_dim=64, max_position_embeddings=512, tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="50MB")
    save_tokenizer(folder)
    return sum(p.numel() for p in model.parameters())


def _measure(layers: int, work: Path) -> dict[str, float]:
    """Build, convert and export one size; return its parameter count and the export's peak RSS."""
    hf, ckpt, out = work / f"hf{layers}", work / f"m{layers}", work / f"out{layers}"
    n = _model(hf, layers)
    env_py = sys.executable
    subprocess.run(
        [env_py, str(CONVERT / "hf_to_megatron.py"), "--hf", str(hf), "--out", str(ckpt), "--tp", "2",
         "--device", "cpu", "--dtype", "bfloat16", "--no-verify"],
        check=True, capture_output=True,
    )  # fmt: skip
    export = [env_py, str(CONVERT / "megatron_to_hf.py"), "--megatron-ckpt", str(ckpt), "--hf-ref", str(hf),
              "--out", str(out), "--device", "cpu", "--no-verify"]  # fmt: skip
    res = subprocess.run([env_py, "-c", _WRAPPER, *export], capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"export failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    peak_kb = int(next(line.split()[1] for line in res.stdout.splitlines() if line.startswith("PEAK_KB")))
    shards = len(list(hf.glob("*.safetensors")))
    return {"layers": layers, "params": n, "peak_gb": peak_kb / 2**20, "hf_shards": shards}


def main(argv: list[str] | None = None) -> int:
    """Measure, fit, print, write."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, nargs=2, default=[4, 28], help="decoder layers of the two sizes")
    p.add_argument("--out", default=".", help="folder for export_memory.json")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [_measure(n, Path(tmp)) for n in a.layers]
    (small, big) = rows
    per_param = (big["peak_gb"] - small["peak_gb"]) * 2**30 / (big["params"] - small["params"])
    fixed_gb = small["peak_gb"] - per_param * small["params"] / 2**30
    print("| layers | parameters | HF shards | export peak RSS (GB) |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['layers']} | {r['params'] / 1e6:.1f} M | {r['hf_shards']} | {r['peak_gb']:.2f} |")
    print(f"\nslope: {per_param:.2f} bytes per parameter; fixed: {fixed_gb:.2f} GB")
    for name, n in (("Qwen3-8B", 8.2e9), ("Qwen3-32B", 32.8e9)):
        print(f"expected peak for {name}: {fixed_gb + per_param * n / 2**30:.0f} GB")
    result = {"rows": rows, "bytes_per_param": per_param, "fixed_gb": fixed_gb}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "export_memory.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
