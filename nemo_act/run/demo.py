"""``nemo-act demo``: the embedded default, end to end on one CPU machine with a tiny model.

1-3. Real ScienceWorld gold experts for a few tasks (train variations; dev variations held out), a tiny random
   Qwen3 whose BPE tokenizer is trained on them, and a warm-up from random weights, the initial policy
   (:mod:`nemo_act.run.warmup`, shared with ``nemo-act bench``).
4. ACT pairs sampled from that policy (train states) and held-out pairs (dev states).
5. The pipelines of ``demo.pipelines`` (ACT -> IL -> RL and the IL -> RL baseline) from the warm-up
   checkpoint, with held-out selection accuracy before and after ACT, and an env evaluation of each
   final checkpoint on held-out test episodes.
6. The results table, the selection table and ``report.png``; both tables also as Markdown in
   ``report/summary.md``, the block README.md shows (``.ci/run`` checks the two are the same).

Everything is reused when re-run with the same settings (the pipeline runner skips finished work).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

from nemo_act.config.load import find_conf
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import write_text_atomic
from nemo_act.report import load_run, plot_runs, results_table
from nemo_act.run.pipeline import PipelineRunner
from nemo_act.run.warmup import warm_up

NOT_SHOWN = """[yellow]What this demo does not show[/]
- A 0.9M-parameter model trained for minutes is not a language model: it learns the action format and
  shallow cues, and its {benchmark} scores say nothing about ACT at scale. The paper's gains are for
  Qwen3-8B / Olmo-3-7B trained for 3 epochs per stage (cluster engine).
- The tiny model cannot reason, so the ACT stage here rewards its bare choice; the reasoning the paper
  studies needs a pretrained model (try model=qwen3_0.6b on one GPU).
- Held-out pairs come from the same tasks' dev variations, not from unseen tasks; a handful of test
  episodes and two seeds give wide error bars."""


def _pipeline_cfg(cfg: ExperimentConfig, name: str, init: str) -> ExperimentConfig:
    """The demo's config with a pipeline file's own settings on top, starting from the warm-up.

    Its stages, and whatever else it sets (``prompt.cot: false`` for ``prompt_nocot``, ``pairs.candidates``
    for ``act3_il_rl``).
    """
    raw = OmegaConf.to_container(OmegaConf.load(find_conf(f"pipeline/{name}.yaml")))
    own = {k: v for k, v in raw.items() if k != "defaults"}  # type: ignore[union-attr]
    tree = OmegaConf.merge(OmegaConf.create(cfg.model_dump(mode="json")), own)
    tree.pipeline.init = init
    return ExperimentConfig.model_validate(OmegaConf.to_container(tree, resolve=True))


SUMMARY_NOTE = "<!-- written by `make demo` (runs/demo/report/summary.md); .ci/run checks README.md shows it -->"


def markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (the first column left-aligned, the others right-aligned, as the console tables)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join([":---", *["---:"] * (len(columns) - 1)]) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def summary_markdown(runs: list[dict[str, Any]]) -> str:
    """The demo's results and held-out selection tables in Markdown (``report/summary.md``, README's block)."""
    _, results = results_table(runs)
    columns = list(dict.fromkeys(k for r in results for k in r))
    result_rows = [[r.get(c, "-") for c in columns] for r in results]
    heads = ["checkpoint", "free: expert", "free: alternative", "free: neither", "malformed", "forced choice"]
    sels = [sel for run in runs for sel in (run.get("selection") or {}).values()]
    sizes = {p["n"] for sel in sels for p in _selection_parts(sel)}
    one = len(sizes) == 1  # every checkpoint on the same pairs: their number said once, so a row fits 120 columns
    pairs = f"{min(sizes)} pairs" if one else "pairs"
    return (
        f"{SUMMARY_NOTE}\n\n{markdown_table(columns, result_rows)}\n\n"
        f"Held-out ACT selection ({pairs} from held-out variations; % ± standard error (count)):\n\n"
        f"{markdown_table(heads, selection_rows(runs, with_n=not one))}\n"
    )


FREE_PARTS = ("accuracy", "picked_alternative", "named_neither", "malformed")
"""The free-generation shares the selection table shows (a result also holds ``chance`` and per-order accuracies)."""


def _selection_parts(sel: dict[str, Any]) -> list[dict[str, Any]]:
    """The proportions of one checkpoint's selection result that its table row shows, in column order."""
    return [*(sel["free"][k] for k in FREE_PARTS), sel["forced"]["accuracy"]]


def _pct(p: dict[str, Any], with_n: bool = True) -> str:
    count = f"{p['count']}/{p['n']}" if with_n else p["count"]
    return f"{100 * p['value']:.1f} ± {100 * p['stderr']:.1f} ({count})"


def selection_rows(runs: list[dict[str, Any]], with_n: bool = True) -> list[list[str]]:
    """Held-out ACT selection results of the runs that have them: one row per checkpoint (the warm-up once).

    Args:
        runs: The runs' results.
        with_n: Each cell's count as ``count/n`` (False: the count alone, where the table says n once).
    """
    rows, seen = [], set()
    for run in runs:
        for name, sel in (run.get("selection") or {}).items():
            label = "initial policy (warm-up)" if name == "init" else f"{run['pipeline']}: {name}"
            if label in seen:
                continue
            seen.add(label)
            rows.append([label, *(_pct(p, with_n) for p in _selection_parts(sel))])
    return rows


def selection_table(runs: list[dict[str, Any]]) -> Table:
    """Held-out ACT selection results of the runs that have them."""
    table = Table(title="held-out ACT selection (pairs from held-out variations; % ± standard error (count/pairs))")
    for col in ["checkpoint", "free: expert", "free: alternative", "free: neither", "malformed", "forced choice"]:
        table.add_column(col, justify="right" if col != "checkpoint" else "left")
    for row in selection_rows(runs):
        table.add_row(*row)
    return table


def run_demo(out: Path, cfg: ExperimentConfig) -> int:
    """Run the demo into ``out`` and print its tables.

    Args:
        out: Demo folder (re-running reuses what is finished).
        cfg: The demo config (``conf/demo.yaml`` plus overrides).

    Returns:
        Exit code.
    """
    console = Console(width=150)
    t0 = time.time()
    data = out / "data"

    def lap(name: str, start: float) -> None:
        timings[name] = time.time() - start

    warm = warm_up(cfg, out, data, console)  # steps 1-3
    timings = dict(warm.timings)
    init = warm.init

    runs = []
    for name in cfg.demo.pipelines:
        t = time.time()
        console.rule(f"[bold]4. pipeline {name} from the warm-up checkpoint")
        PipelineRunner(_pipeline_cfg(cfg, name, init), out / name, data_dir=data, console=console).run()
        runs.append(load_run(out / name))
        lap(name, t)

    table, _rows = results_table(runs)
    console.print(table)
    console.print(selection_table(runs))
    plot = plot_runs(runs, out / "report")
    write_text_atomic(out / "report" / "summary.md", summary_markdown(runs))
    timings["total"] = time.time() - t0
    console.print("timings: " + ", ".join(f"{k} {v / 60:.1f} min" for k, v in timings.items()))
    console.print(f"tables as Markdown: {out / 'report' / 'summary.md'}")
    console.print(f"plots: {plot}; per-episode logs: {out}/<pipeline>/eval/; run logs: {out}/<pipeline>/run.json")
    (out / "timings.json").write_text(json.dumps(timings, indent=2))
    console.print(NOT_SHOWN.format(benchmark=cfg.benchmark.title))
    return 0
