r"""Compare an HF checkpoint and a Megatron checkpoint on fixed inputs: max |logit difference|.

    python tools/convert/verify.py --hf HF_DIR --megatron-ckpt MEGATRON_DIR [--device cpu] \
        [--tolerance 1e-5] [--rtol 1e-4]

The Megatron checkpoint is loaded as TP=1, PP=1 whatever layout it was saved with (distributed
checkpoints reshard on load) in float32, run on the same token ids as the HF model (float32, eager
attention), and the largest absolute difference of the logits is printed. It passes when
``max|diff| <= tolerance + rtol * max|HF logits|``: both sides hold the same (e.g. bf16-trained)
weights in float32, so a correct export differs only by summation order, which grows with the logits'
size and the model's depth; a wrong one (a norm, a projection, a layer out of place) moves the logits
by a sizeable fraction of themselves. Exit status 1 when it fails. The converters run this after
every conversion unless told ``--no-verify``; the cluster engine exports and verifies on CPU over
gloo, as NeMo-RL's ``export_model_from_megatron`` does (``nemo_rl/models/megatron/community_import.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _megatron  # noqa: E402

# (absolute, relative to max |HF logit|). float32 on CPU agrees to rounding (tiny models: 2.4e-7 absolute).
# On GPUs TE's kernels (TF32, fused attention) differ more: ours, not measured on a GPU yet.
DEFAULT_TOLERANCE = {"cpu": (1e-5, 1e-4), "cuda": (1e-3, 1e-2)}


def _rank(rank: int, world: int, port: int, hf_dir: str, ckpt: str, device: str, result: str) -> None:
    _megatron.init_process_group(rank, world, port, device)
    _megatron.register_our_bridges()
    from megatron.bridge import AutoBridge

    bridge = AutoBridge.from_hf_pretrained(hf_dir, dtype="float32")
    model = bridge.load_megatron_model(ckpt, mp_overrides=_megatron.load_overrides(device, ckpt=ckpt))
    ids = _megatron.fixed_input_ids(bridge.hf_pretrained.config.vocab_size)
    ref = _megatron.hf_logits(hf_dir, ids, device)
    diff = (_megatron.megatron_logits(model, ids) - ref).abs().max().item()
    Path(result).write_text(json.dumps({"max_abs_diff": diff, "max_abs_logit": ref.abs().max().item()}))


def logit_diff(hf_dir: str | Path, megatron_ckpt: str | Path, device: str = "cpu") -> tuple[float, float]:
    """(largest |logit difference|, largest |HF logit|) of the two checkpoints on the fixed inputs."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        _megatron.launch(_rank, 1, str(hf_dir), str(megatron_ckpt), device, str(result), device=device)
        out = json.loads(result.read_text())
        return float(out["max_abs_diff"]), float(out["max_abs_logit"])


def max_logit_diff(hf_dir: str | Path, megatron_ckpt: str | Path, device: str = "cpu") -> float:
    """Largest |logit difference| between the two checkpoints on the fixed inputs."""
    return logit_diff(hf_dir, megatron_ckpt, device)[0]


def check(
    hf_dir: str | Path, megatron_ckpt: str | Path, device: str, tolerance: float, rtol: float | None = None
) -> float:
    """Compare the logits (see the module docstring); raises ``SystemExit(1)`` when they disagree.

    Args:
        hf_dir: HF checkpoint folder.
        megatron_ckpt: Megatron checkpoint folder.
        device: ``cpu`` (gloo) or ``cuda``.
        tolerance: Absolute part of the allowed difference.
        rtol: Part relative to the largest |HF logit| (None: the device's default).

    Returns:
        The largest |logit difference|.
    """
    rtol = DEFAULT_TOLERANCE[device][1] if rtol is None else rtol
    diff, scale = logit_diff(hf_dir, megatron_ckpt, device)
    limit = tolerance + rtol * scale
    verdict = "OK" if diff <= limit else "FAILED"
    print(
        f"verify: max |logit diff| = {diff:.3e} (limit {limit:.1e} = {tolerance:.0e} + {rtol:.0e} x max |logit| "
        f"{scale:.3g}) {verdict}",
        flush=True,
    )
    if diff > limit:
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
    p.add_argument("--tolerance", type=float, default=None, help=f"absolute; default: {DEFAULT_TOLERANCE}")
    p.add_argument("--rtol", type=float, default=None, help="relative to max |HF logit|; default: as above")
    args = p.parse_args(argv)
    device = args.device or default_device()
    check(args.hf, args.megatron_ckpt, device, args.tolerance or DEFAULT_TOLERANCE[device][0], args.rtol)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
