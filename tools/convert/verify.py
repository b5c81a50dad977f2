"""Compare an HF checkpoint and a Megatron checkpoint on fixed inputs: max |logit difference|.

    python tools/convert/verify.py --hf HF_DIR --megatron-ckpt MEGATRON_DIR [--tolerance 1e-5]

The Megatron checkpoint is loaded as TP=1, PP=1 whatever layout it was saved with (distributed
checkpoints reshard on load), run on the same token ids as the HF model (float32, eager attention),
and the largest absolute difference of the logits is printed. Exit status 1 when it is over the
tolerance. The converters run this after every conversion unless told ``--no-verify``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _megatron  # noqa: E402

# float32 on CPU must agree to rounding; on GPUs the Megatron side runs in the checkpoint's dtype
# (bf16 for training checkpoints) against float32 HF logits (ours; not measured on a GPU yet)
DEFAULT_TOLERANCE = {"cpu": 1e-5, "cuda": 5e-2}


def _rank(rank: int, world: int, port: int, hf_dir: str, ckpt: str, device: str, result: str) -> None:
    _megatron.init_process_group(rank, world, port, device)
    _megatron.register_our_bridges()
    from megatron.bridge import AutoBridge

    bridge = AutoBridge.from_hf_pretrained(hf_dir, dtype="float32")
    model = bridge.load_megatron_model(
        ckpt, mp_overrides={"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1}
    )
    ids = _megatron.fixed_input_ids(bridge.hf_pretrained.config.vocab_size)
    diff = (_megatron.megatron_logits(model, ids) - _megatron.hf_logits(hf_dir, ids, device)).abs().max().item()
    Path(result).write_text(json.dumps({"max_abs_diff": diff}))


def max_logit_diff(hf_dir: str | Path, megatron_ckpt: str | Path, device: str = "cpu") -> float:
    """Largest |logit difference| between the two checkpoints on the fixed inputs."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        _megatron.launch(_rank, 1, str(hf_dir), str(megatron_ckpt), device, str(result))
        return float(json.loads(result.read_text())["max_abs_diff"])


def check(hf_dir: str | Path, megatron_ckpt: str | Path, device: str, tolerance: float) -> float:
    """:func:`max_logit_diff`, printed; raises ``SystemExit(1)`` over the tolerance."""
    diff = max_logit_diff(hf_dir, megatron_ckpt, device)
    verdict = "OK" if diff <= tolerance else "FAILED"
    print(f"verify: max |logit diff| = {diff:.3e} (tolerance {tolerance:.0e}) {verdict}", flush=True)
    if diff > tolerance:
        raise SystemExit(1)
    return diff


def default_device() -> str:
    """``cuda`` where a GPU is visible, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hf", required=True, help="HF checkpoint folder")
    p.add_argument("--megatron-ckpt", required=True, help="Megatron checkpoint folder")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if visible")
    p.add_argument("--tolerance", type=float, default=None, help=f"default: {DEFAULT_TOLERANCE}")
    args = p.parse_args(argv)
    device = args.device or default_device()
    check(args.hf, args.megatron_ckpt, device, args.tolerance or DEFAULT_TOLERANCE[device])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
