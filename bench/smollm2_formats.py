"""How a checkpoint answers the package's two prompts before any training on a bench's games (issue 58, step 1).

ACT and IL need a policy that answers in the formats: the action prompt (what IL trains on and the policy plays at
test time) with one ``<action>...</action>``, and the selection prompt (what ACT trains on, with its reasoning
instruction) with reasoning then one ``<action>`` naming a candidate. For each checkpoint given (default: the
config's model; ``--with-warm-up`` adds the bench's warm-up of the config, ``demo.warmup_*``), on train-fold expert
states of ``pipeline.experts.tasks``, this prints and writes (``--out``):

- **action prompt**: ``--samples`` samples per state (``pairs.sampling``, as ACT's alternatives are drawn): the share
  with one well-formed tag, the parse status of the others, the share admissible and equal to the expert's action;
- **selection prompt**: one answer per pair (``eval.sampling`` with ``--budget`` new tokens) to pairs of the expert's
  action and a random admissible one: expert / alternative / neither / malformed, the tokens written before the
  last ``<action>`` (the reasoning), and the share that used the whole budget;
- the first answers of each prompt verbatim.

    python bench/smollm2_formats.py conf/bench/textworld_express.yaml model=smollm2_135m --out /tmp/formats
    python bench/smollm2_formats.py ... --checkpoint warm=runs/x/warmup/stages/00_il
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from nemo_act.common.numerics import apply_cpu_numerics
from nemo_act.config import load_config


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", help="a config file (e.g. conf/bench/textworld_express.yaml)")
    p.add_argument("overrides", nargs="*", help="key=value overrides (e.g. model=smollm2_135m)")
    p.add_argument("--checkpoint", action="append", default=[],
                   help="NAME=PATH (repeatable; default: the model unless --with-warm-up)")  # fmt: skip
    p.add_argument("--with-warm-up", action="store_true", help="also the warm-up checkpoint the bench would train")
    p.add_argument("--variations", type=int, default=4, help="train-fold seeds per game for the expert states")
    p.add_argument("--states", type=int, default=32, help="expert states drawn (seeded) for each prompt")
    p.add_argument("--samples", type=int, default=2, help="action-prompt samples per state")
    p.add_argument("--budget", type=int, default=192, help="new tokens for a selection answer")
    p.add_argument("--quote", type=int, default=3, help="answers quoted verbatim per prompt and checkpoint")
    p.add_argument("--out", type=Path, required=True, help="folder for experts, pairs and formats.json")
    return p.parse_args()


def action_figures(gen: Any, trajs: list, picks: list[tuple[int, int]], cfg: Any, samples: int) -> dict[str, Any]:
    """Sample the action prompt at the picked states; count what parses, is admissible, is the expert's."""
    from nemo_act.prompts.state import expert_action
    from nemo_act.rewards import Admissible, normalize_action, parse_action
    from nemo_act.steps.pairs import sampling_request

    requests = [sampling_request(trajs[t], i, cfg) for t, i in picks]
    answers = gen.generate(requests, samples, cfg.pairs.sampling, cfg.pairs.seed)
    status, admissible, expert, texts = Counter(), 0, 0, []
    for (t, i), texts_of_state in zip(picks, answers, strict=True):
        step, listed = trajs[t].steps[i], Admissible(trajs[t].steps[i].admissible_actions)
        for text in texts_of_state:
            parsed = parse_action(text)
            status[parsed.status.value] += 1
            texts.append(text)
            if parsed.well_formed and parsed.action:
                admissible += parsed.action in listed
                expert += normalize_action(parsed.action) in {
                    normalize_action(step.action),
                    normalize_action(expert_action(trajs[t], i)),
                }
    n = sum(status.values())
    return {"samples": n, "status": dict(status), "well_formed": status["ok"] / n, "admissible": admissible / n,
            "expert": expert / n, "texts": texts}  # fmt: skip


def selection_figures(gen: Any, pairs: list, cfg: Any, budget: int) -> dict[str, Any]:
    """Answer the selection prompt once per pair; the outcome shares and the reasoning written before the answer."""
    from nemo_act.evaluation.selection import free_selection, selection_sampling

    sampling = selection_sampling(cfg).model_copy(update={"max_new_tokens": budget})
    summary, rows = free_selection(gen, pairs, cfg, sampling, cfg.seed)
    lengths, full = [], 0
    for row in rows:
        text = row["response"]
        cut = text.lower().rfind("<action>")
        lengths.append(len(gen.tokenizer(text[: cut if cut >= 0 else len(text)])["input_ids"]))
        full += len(gen.tokenizer(text)["input_ids"]) >= budget - 1
    shares = {k: summary[k]["value"] for k in ("accuracy", "picked_alternative", "named_neither", "malformed")}
    return {"pairs": len(rows), **shares, "reasoning_tokens_median": statistics.median(lengths),
            "reasoning_tokens_mean": statistics.fmean(lengths), "used_whole_budget": full / len(rows),
            "texts": [r["response"] for r in rows]}  # fmt: skip


def main() -> None:
    """Collect the states, then answer both prompts with every checkpoint; print a table, write formats.json."""
    args = _args()
    cfg = load_config(args.config, args.overrides)
    apply_cpu_numerics(cfg.cpu_numerics)
    from rich.console import Console
    from rich.table import Table

    from nemo_act.data.io import read_all, read_jsonl
    from nemo_act.data.records import Pair, Trajectory
    from nemo_act.generation import RandomGenerator
    from nemo_act.generation.hf import HFGenerator
    from nemo_act.steps.experts import collect_experts
    from nemo_act.steps.pairs import collect_pairs

    args.out.mkdir(parents=True, exist_ok=True)
    experts = args.out / "experts.jsonl"
    tasks = cfg.pipeline.experts.tasks
    collect_experts(cfg, "train", experts, tasks, args.variations, workers=cfg.pipeline.eval.workers)
    trajs = read_all(experts, Trajectory, "expert trajectories")
    rng = random.Random(0)
    picks = rng.sample([(t, i) for t, tr in enumerate(trajs) for i in range(len(tr.steps))], args.states)
    pairs_file = args.out / "random_pairs.jsonl"
    collect_pairs(experts, RandomGenerator(), cfg, pairs_file, k=1, progress=False)
    all_pairs = list(read_jsonl(pairs_file, Pair))
    pairs = rng.sample(all_pairs, min(args.states, len(all_pairs)))
    checkpoints = dict(c.split("=", 1) for c in args.checkpoint)
    if not checkpoints and not args.with_warm_up:
        checkpoints["model"] = cfg.model.name_or_path
    if args.with_warm_up:
        from nemo_act.run.warmup import warm_up

        checkpoints["warm-up"] = warm_up(cfg, args.out / "bench", args.out / "bench" / "data", Console()).init
    results: dict[str, Any] = {"settings": vars(args) | {"out": str(args.out)}, "tasks": tasks, "overrides":
                               args.overrides, "checkpoints": {}}  # fmt: skip
    for name, path in checkpoints.items():
        gen = HFGenerator(cfg.model, cfg.generation, path)
        t = time.time()
        action = action_figures(gen, trajs, picks, cfg, args.samples)
        t_action, t = time.time() - t, time.time()
        selection = selection_figures(gen, pairs, cfg, args.budget)
        results["checkpoints"][name] = {"path": path, "action": action, "selection": selection,
                                        "seconds": {"action": t_action, "selection": time.time() - t}}  # fmt: skip
        (args.out / "formats.json").write_text(json.dumps(results, indent=1))
    where = ", ".join(tasks) if tasks else f"all {len(cfg.benchmark.games)} tasks"
    table = Table(title=f"answers before training ({args.states} train-fold states of {where})")
    for col in ("checkpoint", "action: one tag", "admissible", "expert", "selection: expert", "alternative",
                "neither", "malformed", "reasoning tokens (median)", "whole budget"):  # fmt: skip
        table.add_column(col, justify="left" if col == "checkpoint" else "right")
    for name, r in results["checkpoints"].items():
        a, s = r["action"], r["selection"]
        table.add_row(name, *(f"{100 * v:.0f}%" for v in (a["well_formed"], a["admissible"], a["expert"],
                      s["accuracy"], s["picked_alternative"], s["named_neither"], s["malformed"])),
                      f"{s['reasoning_tokens_median']:.0f}", f"{100 * s['used_whole_budget']:.0f}%")  # fmt: skip
    console = Console(width=160)
    console.print(table)
    for name, r in results["checkpoints"].items():
        for prompt in ("action", "selection"):
            for text in r[prompt]["texts"][: args.quote]:
                console.print(f"[bold]{name} / {prompt}:[/] {text!r}", soft_wrap=True)
    console.print(f"written: {args.out / 'formats.json'}")


if __name__ == "__main__":
    main()
