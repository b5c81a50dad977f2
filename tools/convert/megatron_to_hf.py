"""Megatron checkpoint -> Hugging Face folder, through Megatron-Bridge.

    python tools/convert/megatron_to_hf.py --megatron-ckpt RUN/stages/01_act/checkpoints/step_40/policy/weights \
        --hf-ref Qwen/Qwen3-8B --out RUN/stages/01_act/hf

The cluster engine runs this after every stage (``nemo_act.engines.nemo_rl.launch``), so each stage
hands the next an HF checkpoint. ``--hf-ref`` is the HF checkpoint the stage started from: it names
the architecture (Megatron-Bridge's ``AutoBridge`` picks the model's bridge and its param mappings)
and supplies the tokenizer and chat template, which are copied next to the weights.

Runs where NeMo-RL's container runs (Megatron-Core + Megatron-Bridge, its pinned versions), with a
single-process gloo group as NeMo-RL's own exporter does. Issue #5 extends the converters (HF ->
Megatron with a chosen TP/PP layout, logit verification, the Olmo-3 bridge, CPU-only nodes).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def export(megatron_ckpt: str, hf_ref: str, out: str, strict: bool = True) -> Path:
    """Write the HF folder of a Megatron checkpoint.

    Args:
        megatron_ckpt: Megatron distributed checkpoint (a NeMo-RL ``policy/weights[/iter_*]`` folder).
        hf_ref: HF checkpoint of the same architecture (the stage's starting point).
        out: Output folder (must not exist yet).
        strict: Fail when a weight of the HF model has no Megatron source.

    Returns:
        The output folder.
    """
    from megatron.bridge import AutoBridge
    from megatron.bridge.training.model_load_save import temporary_distributed_context
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed
    from transformers import AutoTokenizer

    target = Path(out)
    if target.exists():
        raise FileExistsError(f"{target} exists: remove it or choose another --out")
    bridge = AutoBridge.from_hf_pretrained(hf_ref, trust_remote_code=True)
    with temporary_distributed_context(backend="gloo"):
        model_parallel_cuda_manual_seed(0)
        model = bridge.load_megatron_model(megatron_ckpt, skip_temp_dist_context=True)
        bridge.save_hf_pretrained(model, str(target), strict=strict)
    AutoTokenizer.from_pretrained(hf_ref, trust_remote_code=True).save_pretrained(str(target))
    return target


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--megatron-ckpt", required=True, help="Megatron checkpoint folder")
    p.add_argument("--hf-ref", required=True, help="HF checkpoint of the same architecture (and its tokenizer)")
    p.add_argument("--out", required=True, help="HF output folder (new)")
    p.add_argument("--no-strict", action="store_true", help="save even when some HF weights have no source")
    args = p.parse_args(argv)
    print(export(args.megatron_ckpt, args.hf_ref, args.out, strict=not args.no_strict))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
