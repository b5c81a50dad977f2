r"""Megatron checkpoint -> Hugging Face folder, through Megatron-Bridge.

    python tools/convert/megatron_to_hf.py --megatron-ckpt RUN/stages/01_act/checkpoints/step_40/policy/weights \
        --hf-ref Qwen/Qwen3-8B --out RUN/stages/01_act/hf [--device cpu|cuda] [--no-verify]

The cluster engine runs this after every stage (``nemo_act.engines.nemo_rl.launch``), so each stage
hands the next an HF checkpoint; it also turns any checkpoint of :mod:`hf_to_megatron` back. The
checkpoint may have any TP/PP layout (it is loaded as TP=1, PP=1). ``--hf-ref`` is an HF checkpoint of
the same architecture (the stage's starting point): Megatron-Bridge's ``AutoBridge`` takes the model's
bridge from it, and its tokenizer and chat template are copied next to the weights. Weights, config
and tokenizer land in ``--out``; then :mod:`verify` compares the logits of the two sides.
One process: gloo on CPU (:mod:`cpu_shims`), NCCL on a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _megatron  # noqa: E402
import verify  # noqa: E402


def _rank(rank: int, world: int, port: int, ckpt: str, hf_ref: str, out: str, device: str, strict: bool) -> None:
    _megatron.init_process_group(rank, world, port, device)
    _megatron.register_our_bridges()
    from megatron.bridge import AutoBridge
    from transformers import AutoTokenizer

    bridge = AutoBridge.from_hf_pretrained(hf_ref, dtype="float32" if device == "cpu" else "auto")
    # held in the HF folder's type (what is saved): a bf16 export of a 32B model needs 2 bytes per parameter
    overrides = _megatron.load_overrides(device, _megatron.hf_dtype(hf_ref), ckpt=ckpt)
    model = bridge.load_megatron_model(ckpt, mp_overrides=overrides)
    bridge.save_hf_pretrained(model, out, strict=strict)
    AutoTokenizer.from_pretrained(hf_ref).save_pretrained(out)  # tokenizer + chat template


def export(
    megatron_ckpt: str,
    hf_ref: str,
    out: str,
    device: str = "cpu",
    check: bool = True,
    tolerance: float | None = None,
    strict: bool = True,
) -> float | None:
    """Write the HF folder of ``megatron_ckpt`` to ``out``; return the verified max |logit diff|."""
    target = Path(out)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty: remove it or choose another --out")
    _megatron.launch(_rank, 1, str(megatron_ckpt), hf_ref, str(target), device, strict, device=device)
    print(f"megatron -> hf: {megatron_ckpt} -> {target} ({device})", flush=True)
    if not check:
        return None
    return verify.check(target, megatron_ckpt, device, tolerance or verify.DEFAULT_TOLERANCE[device][0])


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--megatron-ckpt", required=True, help="Megatron checkpoint folder (any TP/PP layout)")
    p.add_argument("--hf-ref", required=True, help="HF checkpoint of the same architecture (and its tokenizer)")
    p.add_argument("--out", required=True, help="HF output folder (new)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if visible")
    p.add_argument("--no-verify", action="store_true", help="skip the logit comparison")
    p.add_argument("--tolerance", type=float, default=None, help=f"absolute part; default: {verify.DEFAULT_TOLERANCE}")
    p.add_argument("--no-strict", action="store_true", help="save even when some HF weights have no source")
    a = p.parse_args(argv)
    dev = a.device or verify.default_device()
    export(a.megatron_ckpt, a.hf_ref, a.out, dev, not a.no_verify, a.tolerance, strict=not a.no_strict)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
