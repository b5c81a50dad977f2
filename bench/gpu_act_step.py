"""Time ACT GRPO steps of Qwen3-0.6B through the cluster engine (NeMo-RL + Megatron + vLLM) on one node.

Runs only where a GPU and NeMo-RL are (its release container, or a checkout of the pinned tag with
its dependencies); it goes through the same path as a cluster stage: our recipe mapping onto the
release's GRPO config, our datums, our reward environment, NeMo-RL's GRPO on Megatron with vLLM
rollouts. It prints, per step and as the mean over the steps after the first (warm-up):

* step time and its generation / training parts (NeMo-RL's ``timing/train/*``);
* tokens/s: trained tokens (prompt + response, ``train/global_valid_toks``) per second of step time,
  per GPU; generated tokens/s of the rollout;
* MFU: NeMo-RL's ``performance/train_fp_utilization`` (model FLOPs of the training pass over the
  GPUs' peak) when it reports it, else 6 x parameters x trained tokens over training time and the
  peak given with ``--peak-tflops`` (H100/H200 bf16 dense: 989).

Usage (on a GPU node, from the repository root):
    python bench/gpu_act_step.py [--gpus 1] [--steps 4] [--pairs PAIRS.jsonl] [--out DIR]
Without ``--pairs`` it samples random-policy pairs on ScienceWorld gold experts of two tasks (needs
``scienceworld`` and Java).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from nemo_act.config import load_config
from nemo_act.engines.nemo_rl.launch import run_driver
from nemo_act.stage_data import rows_for

TASKS = ["find-animal", "lifespan-longest-lived"]


def _pairs(cfg, tmp: Path) -> Path:
    from nemo_act.generation import RandomGenerator
    from nemo_act.steps.experts import collect_experts
    from nemo_act.steps.pairs import collect_pairs

    experts = tmp / "experts.jsonl"
    collect_experts(cfg, "train", experts, tasks=TASKS, max_variations=10, workers=2)
    pairs = tmp / "pairs.jsonl"
    collect_pairs(experts, RandomGenerator(), cfg, pairs, k=2)
    return pairs


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def main() -> int:
    """Run the stage, then print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--steps", type=int, default=4, help="GRPO steps (the first is reported as warm-up)")
    p.add_argument("--prompts", type=int, default=32, help="prompts per step (x G=8 completions)")
    p.add_argument("--pairs", default=None, help="ACT pairs JSONL (default: sampled here, see above)")
    p.add_argument("--out", default=None, help="stage folder (default: a temporary one)")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="per-GPU peak for the fallback MFU")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nemo-act-gpu-bench-"))
    out = Path(args.out) if args.out else tmp / "01_act"
    overrides = [
        "engine=nemo_rl",
        "generation=vllm",
        "model=qwen3_0.6b",
        "train=cluster",
        f"train.act.max_steps={args.steps}",
        f"train.act.batch_size={args.prompts * 8}",
        "train.act.num_generations=8",
        "train.act.max_completion_length=512",
        "engine.nemo_rl.cluster.num_nodes=1",
        f"engine.nemo_rl.cluster.gpus_per_node={args.gpus}",
        "engine.nemo_rl.max_total_sequence_length=8192",
        "engine.nemo_rl.save_period=1000",
    ]
    cfg = load_config(overrides=overrides)
    pairs = Path(args.pairs) if args.pairs else _pairs(cfg, tmp)
    out = run_driver("act", cfg.model.name_or_path, rows_for("act", pairs, cfg), cfg, out)
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    steps = [m for m in lines if "timing/train/total_step_time" in m]
    n_params = 0.6e9  # Qwen3-0.6B (0.44B without embeddings); only the fallback MFU uses it
    rows_out = []
    for m in steps:
        t = m["timing/train/total_step_time"]
        toks = m.get("train/global_valid_toks", float("nan"))
        gen_t = m.get("timing/train/generation", float("nan"))
        gen_toks = m.get("train/mean_gen_tokens_per_sample", float("nan")) * args.prompts * 8
        train_t = m.get("timing/train/policy_training", float("nan"))
        mfu = m.get("performance/train_fp_utilization")
        if mfu is None:
            mfu = 6 * n_params * toks / (train_t * args.peak_tflops * 1e12 * args.gpus)
        rows_out.append((m["step"], t, gen_t, train_t, toks / t / args.gpus, gen_toks / gen_t, mfu))
    print(f"\nACT GRPO, Qwen3-0.6B, {args.gpus} GPU(s), {args.prompts} prompts x G=8 per step")
    print(f"{'step':>4} {'step s':>8} {'gen s':>8} {'train s':>8} {'tok/s/GPU':>10} {'gen tok/s':>10} {'MFU':>7}")
    for r in rows_out:
        print(f"{r[0]:>4} {r[1]:>8.1f} {r[2]:>8.1f} {r[3]:>8.1f} {r[4]:>10.0f} {r[5]:>10.0f} {100 * r[6]:>6.1f}%")
    after = rows_out[1:]
    if after:
        means = [_mean([r[i] for r in after]) for i in range(1, 7)]
        print(
            f"mean of steps 2..: step {means[0]:.1f} s, {means[3]:.0f} trained tok/s/GPU, "
            f"{means[4]:.0f} generated tok/s, MFU {100 * means[5]:.1f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
