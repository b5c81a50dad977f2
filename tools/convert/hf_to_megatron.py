"""HF checkpoint -> Megatron distributed checkpoint with a chosen TP/PP layout, through Megatron-Bridge.

    python tools/convert/hf_to_megatron.py --hf Qwen/Qwen3-8B --out ckpt/qwen3-8b-tp2 --tp 2 [--pp 1] [--ep 1]
        [--device cpu|cuda] [--dtype float32|bfloat16] [--no-verify] [--tolerance 1e-5]

One process per rank (TP x PP x EP of them; expert parallelism takes its ranks from data parallelism):
gloo on CPU (a login or CPU node; Megatron-Core's local layers, :mod:`cpu_shims`), NCCL on GPUs.
Megatron-Bridge's ``AutoBridge`` picks the model's bridge and parameter mappings (Qwen3 and Qwen3-MoE
ship with it; Olmo-2/3 come from :mod:`olmo3_bridge`). The checkpoint records the tokenizer of the HF
folder. Afterwards :mod:`verify` compares logits (disable with ``--no-verify``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _megatron  # noqa: E402
import verify  # noqa: E402


def _rank(
    rank: int, world: int, port: int, hf: str, out: str, tp: int, pp: int, device: str, dtype: str | None, ep: int
) -> None:
    _megatron.init_process_group(rank, world, port, device)
    _megatron.register_our_bridges()
    from megatron.bridge import AutoBridge

    bridge = AutoBridge.from_hf_pretrained(hf, dtype="float32" if device == "cpu" else "auto")
    model = _megatron.build_model(bridge, tp, pp, device, dtype, ep)
    has_tokenizer = any((Path(hf) / f).exists() for f in ("tokenizer.json", "tokenizer_config.json"))
    bridge.save_megatron_model(model, out, hf_tokenizer_path=hf if has_tokenizer or not Path(hf).exists() else None)


def convert(
    hf: str,
    out: str,
    tp: int = 1,
    pp: int = 1,
    device: str = "cpu",
    check: bool = True,
    tolerance: float | None = None,
    dtype: str | None = None,
    ep: int = 1,
) -> float | None:
    """Write the Megatron checkpoint of ``hf`` to ``out``; return the verified max |logit diff|.

    ``dtype``: parameter type of the checkpoint (None: float32 on CPU, the HF config's on GPUs).
    ``ep``: expert parallel size (models with experts); TP x PP x EP processes run.
    """
    if Path(out).exists() and any(Path(out).iterdir()):
        raise FileExistsError(f"{out} is not empty: remove it or choose another --out")
    _megatron.launch(_rank, tp * pp * ep, hf, out, tp, pp, device, dtype, ep, device=device)
    print(f"hf -> megatron: {hf} -> {out} (TP={tp}, PP={pp}, EP={ep}, {device})", flush=True)
    return verify.check(hf, out, device, tolerance or verify.DEFAULT_TOLERANCE[device][0]) if check else None


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hf", required=True, help="HF checkpoint (hub name or folder)")
    p.add_argument("--out", required=True, help="Megatron checkpoint folder (new)")
    p.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    p.add_argument("--pp", type=int, default=1, help="pipeline parallel size")
    p.add_argument("--ep", type=int, default=1, help="expert parallel size (models with experts)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if visible")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default=None, help="default: float32 on CPU")
    p.add_argument("--no-verify", action="store_true", help="skip the logit comparison")
    p.add_argument("--tolerance", type=float, default=None, help=f"absolute part; default: {verify.DEFAULT_TOLERANCE}")
    a = p.parse_args(argv)
    dev = a.device or verify.default_device()
    convert(a.hf, a.out, a.tp, a.pp, dev, not a.no_verify, a.tolerance, a.dtype, a.ep)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
