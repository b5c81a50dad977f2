"""Print evaluation throughput per benchmark: episodes/min and env steps/s with 1, 2 and 4 env workers.

The policy is fixed and fast (``random``: uniform over the admissible actions, so episodes run to the
50-step cap and the figures are env-bound). Then the ratio of total evaluation time to pure
generation time for a tiny HF model on ScienceWorld: how much of an evaluation the envs cost.

WebShop runs where ``WEBSHOP_DIR`` names a prepared WebShop checkout and this Python has its packages
(docs/benchmarks.md "WebShop"): the small protocol's test goals, plus the latency of each kind of env call (reset,
search, click, buy) measured in this process; elsewhere its row says why it was skipped.

Usage: python bench/eval_throughput.py [--episodes 8] [--workers 1,2,4] [--alfworld-data DIR] [--only NAMES]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from nemo_act.config import load_config
from nemo_act.evaluation.rollout import evaluate_policy, list_episodes
from nemo_act.generation import RandomGenerator, make_generator
from nemo_act.generation.base import GenerationRequest
from nemo_act.tiny_model import build_tiny_model

REPO = Path(__file__).resolve().parents[1]


class TimedGenerator:
    """Wraps a generator and adds up the wall time of its ``generate`` calls."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.seconds = inner, inner.name, 0.0

    def generate(self, requests: Sequence[GenerationRequest], n, sampling, seed):
        """Generate with the wrapped policy, timing the call."""
        t = time.perf_counter()
        try:
            return self.inner.generate(requests, n, sampling, seed)
        finally:
            self.seconds += time.perf_counter() - t


def _run(cfg, split, tasks, workers, out, generator=None):
    t = time.perf_counter()
    res = evaluate_policy(
        generator or RandomGenerator(),
        cfg,
        split,
        out,
        tasks=tasks,
        max_variations=1,
        seeds=[0],
        workers=workers,
        envs_per_worker=2,
        progress=False,
    )
    dt = time.perf_counter() - t
    return res["episodes"], res["per_seed"][0]["mean_steps"] * res["episodes"], dt


def _webshop_latency(cfg, goals: int) -> None:
    """Seconds per kind of WebShop env call, in this process: the env's start, reset, search, click, buy."""
    from nemo_act.benchmarks.webshop import EpisodeEnv, play_gold

    calls: dict[str, list[float]] = {"start": [], "reset": [], "search": [], "click": [], "buy": []}
    t = time.perf_counter()
    env = EpisodeEnv(cfg.benchmark)
    env.goals("goal")  # builds WebShop's server: products, goals, search index (a JVM)
    calls["start"].append(time.perf_counter() - t)
    inner_reset, inner_step = env.reset, env.step

    def reset(task, variation):
        t = time.perf_counter()
        try:
            return inner_reset(task, variation)
        finally:
            calls["reset"].append(time.perf_counter() - t)

    def step(action):
        t = time.perf_counter()
        try:
            return inner_step(action)
        finally:
            kind = "search" if action.startswith("search[") else "buy" if action == "click[buy now]" else "click"
            calls[kind].append(time.perf_counter() - t)

    env.reset, env.step = reset, step  # type: ignore[method-assign]
    for goal in range(goals):  # the gold policy: every kind of call, on real pages
        play_gold(env, "goal", goal, "test", cfg.benchmark.max_steps)
    table = Table(title=f"WebShop env calls (small protocol, gold policy on test goals 0-{goals - 1}), seconds")
    for col in ["call", "n", "median", "max"]:
        table.add_column(col, justify="right")
    for kind, times in calls.items():
        times = sorted(times)
        table.add_row(kind, str(len(times)), f"{times[len(times) // 2]:.3f}", f"{times[-1]:.3f}")
    Console(width=140).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--workers", default="1,2,4")
    default_alf = os.environ.get("ALFWORLD_DATA", REPO.parent / "shared" / "benchmarks" / "alfworld")
    parser.add_argument("--alfworld-data", default=default_alf)
    parser.add_argument("--only", default="scienceworld,alfworld,webshop", help="benchmarks to measure")
    parser.add_argument("--no-model", action="store_true", help="skip the tiny-model generation ratio")
    args = parser.parse_args()
    only = set(args.only.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="nemo-act-evalbench-"))
    workers = [int(w) for w in args.workers.split(",")]
    table = Table(title=f"evaluation throughput, random policy, {args.episodes} episodes, 2 envs per worker")
    for col in ["benchmark", "workers", "episodes", "env steps", "seconds", "episodes/min", "env steps/s"]:
        table.add_column(col, justify="right")

    sw = load_config()
    sw_tasks = [t for t, _ in list_episodes(sw, "test", max_variations=1)][: args.episodes]
    alf = load_config(overrides=["benchmark=alfworld", f"benchmark.data_dir={args.alfworld_data}"])
    alf_games = [g for g, _ in list_episodes(alf, "valid_seen")][: args.episodes]
    runs = [("scienceworld", sw, "test", sw_tasks), ("alfworld", alf, "valid_seen", alf_games)]
    ws = None
    if os.environ.get("WEBSHOP_DIR"):
        ws = load_config(overrides=["benchmark=webshop", "benchmark.protocol=small"])
        runs.append(("webshop", ws, "test", [str(i) for i in range(args.episodes)]))
    for name, cfg, split, tasks in runs:
        if name not in only:
            continue
        for w in workers:
            n, steps, dt = _run(cfg, split, tasks, w, tmp / f"{name}_{w}")
            table.add_row(name, str(w), str(n), f"{steps:.0f}", f"{dt:.1f}", f"{60 * n / dt:.1f}", f"{steps / dt:.1f}")
    if ws is None:
        table.add_row("webshop", "-", "-", "-", "-", "skipped", "WEBSHOP_DIR not set (a prepared WebShop checkout)")
    Console(width=140).print(table)
    if ws is not None and "webshop" in only:
        _webshop_latency(ws, args.episodes)
    if args.no_model:
        return

    model = build_tiny_model(tmp / "tiny", sw.model.tiny)
    timed = TimedGenerator(make_generator(str(model), sw))
    n, steps, dt = _run(sw, "test", sw_tasks[:4], 1, tmp / "tiny_eval", generator=timed)
    print(
        f"tiny HF model on ScienceWorld ({n} episodes, {steps:.0f} steps, 1 worker x 2 envs): total {dt:.1f}s, "
        f"generation {timed.seconds:.1f}s, total / generation = {dt / timed.seconds:.2f}"
    )


if __name__ == "__main__":
    main()
