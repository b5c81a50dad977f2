r"""What each data builder costs per 100 expert states: ACT pairs next to Early Experience, SAND and Agent-R.

    .venv/bin/python bench/reflection_cost.py [--tasks lifespan-longest-lived find-non-living-thing]
        [--policy runs/tiny-model] [--k 3] [--sand-policy random] [--out runs/bench/reflection_cost]

On real ScienceWorld gold states (test variation 1 of each task), with the same initial policy for both
(default: the tiny model, ``nemo-act tiny-model``), it times ACT pair construction (``pairs.k`` = 1, the
paper's), the Early Experience build (K alternatives, env branching, one reflection per state) and the
Agent-R build (one policy rollout per expert episode, revisions), and counts for each the env steps
(branching replays the expert prefix per candidate: ``index + 1`` steps each; rollouts: their steps;
resets not counted) and the generated tokens (the policy's outputs re-tokenised with its own tokenizer).
SAND samples its candidates and rolls them on with ``--sand-policy`` (default: the random policy, since
the untrained tiny model's samples rarely parse and it would roll on nothing) and critiques with
``--policy``; its env steps are the replayed prefixes plus every roll-on's steps to the episode's end.
Figures are printed per 100 expert states, as a table, and written to ``<out>/reflection_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from nemo_act.config.load import load_config
from nemo_act.data.io import read_jsonl
from nemo_act.data.records import Trajectory
from nemo_act.evaluation.rollout import EpisodeRecord
from nemo_act.generation import make_generator
from nemo_act.reflection.agent_r import build_agent_r
from nemo_act.reflection.early_experience import build_early_experience, read_reflections
from nemo_act.reflection.sand import build_sand, read_deliberations
from nemo_act.steps.experts import collect_experts
from nemo_act.steps.pairs import collect_pairs


class CountingPolicy:
    """Wraps a generator and counts the tokens of everything it generates (with the policy's tokenizer)."""

    def __init__(self, inner, tokenizer) -> None:
        self.inner, self.tok, self.tokens = inner, tokenizer, 0
        self.name = inner.name

    def generate(self, requests, n, sampling, seed):
        """The inner policy's answers; their tokens are added to ``tokens``."""
        out = self.inner.generate(requests, n, sampling, seed)
        self.tokens += sum(len(self.tok(t, add_special_tokens=False)["input_ids"]) for group in out for t in group)
        return out


def main() -> None:
    """Build every dataset on the same states and print their cost per 100 states."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["lifespan-longest-lived", "find-non-living-thing"])
    p.add_argument("--policy", default="runs/tiny-model")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--sand-policy", default="random", help="SAND's current policy (candidates and roll-on)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default="runs/bench/reflection_cost")
    a = p.parse_args()
    from transformers import AutoTokenizer

    out = Path(a.out)
    cfg = load_config(overrides=[f"early_experience.k={a.k}", "pairs.min_state_share=0", f"run_dir={out}"])
    experts = out / "experts.jsonl"
    collect_experts(cfg, "test", experts, tasks=a.tasks, max_variations=1, workers=a.workers, progress=False)
    trajs = list(read_jsonl(experts, Trajectory))
    states = sum(len(t.steps) for t in trajs)
    tok = AutoTokenizer.from_pretrained(a.policy)
    rows = {}

    policy = CountingPolicy(make_generator(a.policy, cfg), tok)
    t = time.time()
    summary = collect_pairs(experts, policy, cfg, out / "pairs.jsonl", k=1, progress=False)
    rows["ACT pairs (K=1)"] = {"seconds": time.time() - t, "env_steps": 0, "tokens": policy.tokens,
                               "kept": summary.counts["pairs"]}  # fmt: skip

    policy = CountingPolicy(make_generator(a.policy, cfg), tok)
    t = time.time()
    summary = build_early_experience(cfg, experts, policy, out / "early_experience", a.workers, progress=False)
    records = read_reflections(summary.out)
    steps = sum((r.index + 1) * sum(c.observation is not None for c in r.candidates) for r in records)
    rows[f"Early Experience (K={a.k})"] = {"seconds": time.time() - t, "env_steps": steps, "tokens": policy.tokens,
                                          "kept": summary.counts["kept"]}  # fmt: skip

    policy = CountingPolicy(make_generator(a.sand_policy, cfg), tok)
    critic = CountingPolicy(make_generator(a.policy, cfg), tok)
    t = time.time()
    summary = build_sand(cfg, experts, policy, out / "sand", a.workers, progress=False, critic=critic)
    records = read_deliberations(summary.out)
    steps = sum(r.index * len(r.candidates) + sum(c.n_steps for c in r.candidates) for r in records)
    name = f"SAND (N={cfg.sand.candidates}, {a.sand_policy} roll-on)"
    rows[name] = {"seconds": time.time() - t, "env_steps": steps, "tokens": policy.tokens + critic.tokens,
                  "kept": summary.counts["kept"]}  # fmt: skip

    policy = CountingPolicy(make_generator(a.policy, cfg), tok)
    t = time.time()
    summary = build_agent_r(cfg, experts, policy, out / "agent_r", a.workers, progress=False)
    episodes = list(read_jsonl(out / "agent_r" / "rollouts" / "episodes.jsonl", EpisodeRecord))
    rows["Agent-R"] = {"seconds": time.time() - t, "env_steps": sum(len(e.steps) for e in episodes),
                       "tokens": policy.tokens, "kept": summary.counts["kept"]}  # fmt: skip

    table = Table(title=f"cost per 100 expert states ({states} ScienceWorld gold states, policy {a.policy})")
    for col in ("builder", "seconds", "env steps", "generated tokens", "examples kept"):
        table.add_column(col, justify="left" if col == "builder" else "right")
    for name, r in rows.items():
        per = 100 / states
        table.add_row(
            name, f"{r['seconds'] * per:.1f}", f"{r['env_steps'] * per:.0f}", f"{r['tokens'] * per:.0f}",
            f"{r['kept'] * per:.1f}",
        )  # fmt: skip
    Console().print(table)
    result = {"states": states, "policy": a.policy, "rows": rows}
    (out / "reflection_cost.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
