"""Print pair-collection throughput: states/s and sampled tokens/s for the random policy and a tiny model.

Usage: python bench/pairs_throughput.py [--tasks T1,T2] [--k 2]
Collects real ScienceWorld gold experts for a few short tasks first (printing env steps/s).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from nemo_act.config import load_config
from nemo_act.data import Trajectory, read_jsonl
from nemo_act.generation import RandomGenerator
from nemo_act.generation.hf import HFGenerator
from nemo_act.steps.experts import collect_experts
from nemo_act.steps.pairs import collect_pairs
from nemo_act.tiny_model import build_tiny_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default="find-animal,lifespan-longest-lived")
    parser.add_argument("--k", type=int, default=2)
    args = parser.parse_args()
    cfg = load_config()
    tmp = Path(tempfile.mkdtemp(prefix="nemo-act-bench-"))

    t = time.perf_counter()
    experts = tmp / "experts.jsonl"
    collect_experts(cfg, "train", experts, tasks=args.tasks.split(","), max_variations=2, progress=False)
    dt = time.perf_counter() - t
    steps = sum(len(tr.steps) for tr in read_jsonl(experts, Trajectory))
    print(f"experts: {steps} gold steps in {dt:.1f}s ({steps / dt:.2f} env steps/s incl. JVM start)")

    t = time.perf_counter()
    c = collect_pairs(experts, RandomGenerator(), cfg, tmp / "random.jsonl", k=args.k, progress=False).counts
    dt = time.perf_counter() - t
    print(f"random policy: {c['states']} states in {dt:.2f}s ({c['states'] / dt:.1f} states/s)")

    model = build_tiny_model(tmp / "tiny", cfg.model.tiny, corpus=[experts])
    gen = HFGenerator(cfg.model, cfg.generation, str(model))
    t = time.perf_counter()
    c = collect_pairs(experts, gen, cfg, tmp / "tiny.jsonl", k=args.k, progress=False).counts
    dt = time.perf_counter() - t
    tokens = c["sampled"] * cfg.pairs.sampling.max_new_tokens  # upper bound: an untrained model rarely stops early
    print(
        f"tiny model ({cfg.generation.backend}, batch {cfg.generation.batch_size}): {c['states']} states in {dt:.1f}s "
        f"({c['states'] / dt:.2f} states/s, <= {tokens / dt:.0f} generated tokens/s)"
    )


if __name__ == "__main__":
    main()
