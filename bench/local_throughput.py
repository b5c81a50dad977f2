"""Print local-engine throughput: the ACT stage on the tiny model, and ScienceWorld evaluation.

ACT stage: generated tokens/s, optimizer steps/s and peak RSS of a short GRPO run on real pairs.
Evaluation: env steps/s of the random policy with 1 and 2 env worker processes.

Usage: python bench/local_throughput.py [--act-steps 10] [--episodes 4]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from nemo_act.config import load_config
from nemo_act.data import Pair, read_jsonl
from nemo_act.engines.local.stages import train_stage
from nemo_act.evaluation.rollout import evaluate_policy
from nemo_act.generation import RandomGenerator
from nemo_act.kinds.act import act_rows
from nemo_act.steps.experts import collect_experts
from nemo_act.steps.pairs import collect_pairs
from nemo_act.tiny_model import build_tiny_model

TASKS = ["find-animal", "lifespan-longest-lived"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--act-steps", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=4, help="eval episodes (test variations of 2 tasks)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nemo-act-bench-"))
    cfg = load_config(
        overrides=[
            f"train.act.max_steps={args.act_steps}",
            "train.act.batch_size=16",
            "train.act.num_generations=8",
            "train.act.grad_accum=1",
            "train.act.max_completion_length=32",
            "train.act.logging_steps=1",
        ]
    )
    experts = tmp / "experts.jsonl"
    collect_experts(cfg, "train", experts, tasks=TASKS, max_variations=2, progress=False)
    model = build_tiny_model(tmp / "tiny", cfg.model.tiny, corpus=[experts])
    pairs_path = tmp / "pairs.jsonl"
    collect_pairs(experts, RandomGenerator(), cfg, pairs_path, progress=False)
    rows = act_rows(list(read_jsonl(pairs_path, Pair)), cfg)

    t = time.perf_counter()
    out = train_stage("act", str(model), rows, cfg, tmp / "act")
    dt = time.perf_counter() - t
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [h for h in history if "completions/mean_length" in h]
    tokens = sum(h["completions/mean_length"] * cfg.train.act.batch_size for h in steps)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"ACT stage (tiny Qwen3, {cfg.train.act.batch_size} completions/step, G={cfg.train.act.num_generations}):")
    print(f"  {len(steps)} optimizer steps in {dt:.1f}s = {len(steps) / dt:.3f} steps/s")
    print(f"  {tokens:.0f} generated tokens = {tokens / dt:.0f} generated tokens/s (incl. training)")
    print(f"  peak RSS {peak_mb:.0f} MB")

    variations = max(1, args.episodes // len(TASKS))
    for workers in (1, 2):
        t = time.perf_counter()
        res = evaluate_policy(
            RandomGenerator(),
            cfg,
            "test",
            tmp / f"eval_{workers}",
            tasks=TASKS,
            max_variations=variations,
            seeds=[0],
            workers=workers,
            envs_per_worker=2,
            progress=False,
        )
        dt = time.perf_counter() - t
        n_steps = res["per_seed"][0]["mean_steps"] * res["episodes"]
        print(
            f"eval, random policy, {workers} worker(s) x 2 envs: {res['episodes']} episodes, "
            f"{n_steps:.0f} env steps in {dt:.1f}s = {n_steps / dt:.2f} env steps/s"
        )


if __name__ == "__main__":
    main()
