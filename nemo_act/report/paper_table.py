"""The paper's results table over many run folders: methods x (benchmark columns, MATH-500, GPQA).

Rows are methods, named by their pipeline (``il_rl`` -> "IL -> RL"), in the paper's order: prompting, IL,
the reflection baselines, ACT, then the controls; a pipeline we do not know gets its own row under its name.
Columns are what the benchmarks' adapters offer (``PAPER_COLUMNS``: the paper's ALFWorld in- and
out-of-distribution success, WebShop success, ScienceWorld score) and MATH-500 / GPQA-Diamond accuracy, each
mean +- std over seeds.
A run folder fills the cells of its final checkpoint's env evaluation (``run.json``), of extra evaluations of
it on other splits (``nemo-act eval --policy <run>/stages/<last> --split valid_unseen --out
<run>/eval_valid_unseen``: any ``<run>/eval_*/summary.json``) and of ``<run>/reasoning/<set>/summary.json``
(``nemo-act eval-reasoning ... --out <run>/reasoning/<set>``); run folders of the same method on other
benchmarks fill the same row. A cell nobody filled says "not run" (never 0);
the best mean per column is marked. Written as Markdown, CSV and LaTeX, with a grouped bar plot.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from nemo_act.benchmarks.base import usable_adapters
from nemo_act.common.paths import conf_roots
from nemo_act.data.io import RUN_REMEDY, read_json
from nemo_act.stage_kinds import STAGE_KINDS

NOT_RUN = "not run"

METHODS: dict[str, str] = {
    "prompt_cot": "Prompting (CoT)",
    "prompt_nocot": "Prompting (no CoT)",
    "il": "IL",
    "il_rl": "IL -> RL",
    "ee": "Early Experience",
    "ee_rl": "Early Experience -> RL",
    "ee_wm_rl": "Early Experience (world model) -> RL",
    "sand": "SAND",
    "sand_rl": "SAND -> RL",
    "agent_r": "Agent-R",
    "agent_r_rl": "Agent-R -> RL",
    "act": "ACT",
    "act_il": "ACT -> IL",
    "act_il_rl": "ACT -> IL -> RL",
    "il_il": "control: IL -> IL",
    "il_rl_rl": "control: IL -> RL -> RL",
    "sft_choice_il": "control: SFT-on-choice -> IL",
    "dpo_il": "control: DPO -> IL",
    "act_noreason_il": "control: no-reasoning ACT -> IL",
    "sft_choice_il_rl": "control: SFT-on-choice -> IL -> RL",
    "dpo_il_rl": "control: DPO -> IL -> RL",
    "act_noreason_il_rl": "control: no-reasoning ACT -> IL -> RL",
    "act3_il_rl": "ablation: 3-way ACT -> IL -> RL",
}


@dataclass(frozen=True)
class Column:
    """One column: where its number comes from."""

    key: str
    label: str
    source: str  # "env": (benchmark, split, metric); "reasoning": the set
    benchmark: str = ""
    split: str = ""
    metric: str = ""
    protocol: tuple[tuple[str, str], ...] = ()  # benchmark config values an evaluation must have had (the paper's)


REASONING_COLUMNS = (
    Column("math500", "MATH-500 %", "reasoning", "math500"),
    Column("gpqa", "GPQA-Diamond %", "reasoning", "gpqa"),
)


def columns() -> tuple[Column, ...]:
    """The table's columns: the registered benchmarks' ``PAPER_COLUMNS`` in their ``order``, then the reasoning sets."""
    return _columns(tuple(conf_roots()))


@cache
def _columns(search_path: tuple[Path, ...]) -> tuple[Column, ...]:
    """:func:`columns` for one config search path (``$NEMO_ACT_CONF`` may name other benchmarks)."""
    env = []
    for name, mod in usable_adapters():
        for col in getattr(mod, "PAPER_COLUMNS", ()):
            spec = dict(col)
            order = spec.pop("order")
            protocol = tuple(sorted(spec.pop("protocol", {}).items()))
            env.append((order, Column(source="env", benchmark=name, protocol=protocol, **spec)))
    return tuple(c for _, c in sorted(env, key=lambda x: x[0])) + REASONING_COLUMNS


Cell = tuple[float, float]  # mean, std over seeds


def _final_eval(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The env evaluations of a run's final checkpoint (the last one evaluated)."""
    evals = list((run.get("eval") or {}).values())
    return evals[-1:] if evals else []


def cells_of(run_dir: str | Path) -> tuple[str, dict[str, Cell]]:
    """A finished run folder's pipeline name and the cells it fills.

    Raises:
        FileNotFoundError: The folder has no ``run.json``.
    """
    run_dir = Path(run_dir)
    path = run_dir / "run.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no run.json (is this a finished `nemo-act run` folder?)")
    run = read_json(path, RUN_REMEDY)
    cells: dict[str, Cell] = {}
    extra = [json.loads(p.read_text()) for p in sorted(run_dir.glob("eval_*/summary.json"))]
    for ev in _final_eval(run) + extra:
        for col in columns():
            if (
                col.source == "env"
                and ev.get("benchmark") == col.benchmark
                and ev.get("split") == col.split
                and all(ev.get("benchmark_config", {}).get(k, v) == v for k, v in col.protocol)
            ):  # an evaluation under another protocol (WebShop small) is not the paper's number
                cells[col.key] = (ev[f"{col.metric}_mean"], ev[f"{col.metric}_std"])
    for col in columns():
        summary = run_dir / "reasoning" / col.benchmark / "summary.json"
        if col.source == "reasoning" and summary.exists():
            r = json.loads(summary.read_text())
            cells[col.key] = (r["accuracy_mean"], r["accuracy_std"])
    return run["pipeline"], cells


def method_label(pipeline: str, stages: Sequence[dict[str, Any]]) -> str:
    """A pipeline's row: the paper's name of it (:data:`METHODS`), else its name and its stage kinds' labels.

    Args:
        pipeline: The run's ``pipeline.name``.
        stages: The run's stages as ``run.json`` lists them (``{"stage": "01_act", ...}``).

    Returns:
        E.g. "ACT -> IL -> RL" for ``act_il_rl``; "mine (ACT -> IL)" for a pipeline ``mine`` of stages ``act, il``
        (a kind's ``label`` from the registry; a kind this process has not registered, by its name).
    """
    if pipeline in METHODS or not stages:
        return METHODS.get(pipeline, pipeline)
    kinds = [s["stage"].split("_", 1)[1] for s in stages]
    names = [(STAGE_KINDS[k].label or k) if k in STAGE_KINDS else k for k in kinds]
    return f"{pipeline} ({' -> '.join(names)})"


def build(run_dirs: Sequence[str | Path]) -> tuple[list[str], dict[str, dict[str, Cell]]]:
    """Rows (method labels, the paper's order first) and their cells, merged over run folders.

    Raises:
        ValueError: Two run folders fill the same cell of the same method (say which to keep).
    """
    filled: dict[str, dict[str, Cell]] = {}
    origin: dict[tuple[str, str], Path] = {}
    for d in run_dirs:
        pipeline, cells = cells_of(d)
        label = method_label(pipeline, read_json(Path(d) / "run.json", RUN_REMEDY).get("stages", []))
        for key, cell in cells.items():
            if (label, key) in origin:
                raise ValueError(f"{d} and {origin[label, key]} both give '{label}' a {key} result: report one of them")
            origin[label, key] = Path(d)
            filled.setdefault(label, {})[key] = cell
    order = [m for m in METHODS.values() if m in filled] + sorted(m for m in filled if m not in METHODS.values())
    return order, filled


def best(rows: list[str], filled: dict[str, dict[str, Cell]]) -> dict[str, set[str]]:
    """Per column, the methods with the highest mean (ties all marked)."""
    out: dict[str, set[str]] = {}
    for col in columns():
        means = {m: filled[m][col.key][0] for m in rows if col.key in filled[m]}
        if means:
            top = max(means.values())
            out[col.key] = {m for m, v in means.items() if v == top}
    return out


def _text(cell: Cell | None) -> str:
    return NOT_RUN if cell is None else f"{cell[0]:.2f} ± {cell[1]:.2f}"


def write(run_dirs: Sequence[str | Path], out: str | Path) -> dict[str, Path]:
    """Write ``paper_table.md``, ``.csv``, ``.tex`` and ``paper_table.png`` into ``out``; return their paths."""
    rows, filled = build(run_dirs)
    marked = best(rows, filled)
    cols = list(columns())  # the paper's columns, every one: a column nobody ran says "not run" in each row
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / f"paper_table.{k}" for k in ("md", "csv", "tex", "png")}

    md = ["| method | " + " | ".join(c.label for c in cols) + " |", "|---|" + "---|" * len(cols)]
    for m in rows:
        texts = [_text(filled[m].get(c.key)) for c in cols]
        texts = [f"**{t}**" if m in marked.get(c.key, ()) else t for t, c in zip(texts, cols, strict=True)]
        md.append(f"| {m} | " + " | ".join(texts) + " |")
    paths["md"].write_text("\n".join(md) + "\n\nmean ± std over seeds; **best** per column; " + NOT_RUN + ": no run.\n")

    with paths["csv"].open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["method"] + [f"{c.key}_{x}" for c in cols for x in ("mean", "std", "best")])
        for m in rows:
            line: list[Any] = [m]
            for c in cols:
                cell = filled[m].get(c.key)
                line += [NOT_RUN, NOT_RUN, ""] if cell is None else [f"{cell[0]:.4f}", f"{cell[1]:.4f}",
                                                                     m in marked.get(c.key, ())]  # fmt: skip
            w.writerow(line)

    def tex(s: str) -> str:
        return s.replace("%", r"\%").replace("->", r"$\to$").replace("_", r"\_")

    lines = [r"\begin{tabular}{l" + "c" * len(cols) + "}", r"\toprule",
             "Method & " + " & ".join(tex(c.label) for c in cols) + r" \\", r"\midrule"]  # fmt: skip
    for m in rows:
        texts = []
        for c in cols:
            cell = filled[m].get(c.key)
            t = "not run" if cell is None else f"{cell[0]:.2f} $\\pm$ {cell[1]:.2f}"
            texts.append(rf"\textbf{{{t}}}" if m in marked.get(c.key, ()) else t)
        lines.append(tex(m) + " & " + " & ".join(texts) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    paths["tex"].write_text("\n".join(lines) + "\n")
    _plot(rows, filled, [c for c in cols if any(c.key in filled[m] for m in rows)] or cols, paths["png"])
    return paths


def _plot(rows: list[str], filled: dict[str, dict[str, Cell]], cols: list[Column], path: Path) -> None:
    """Grouped bars: one group per column, one bar per method that has the cell (error bars: std)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(cols)), 4.5))
    width = 0.8 / max(len(rows), 1)
    palette = plt.get_cmap("tab20")
    for i, m in enumerate(rows):
        xs = [j + (i - (len(rows) - 1) / 2) * width for j, c in enumerate(cols) if c.key in filled[m]]
        cells = [filled[m][c.key] for c in cols if c.key in filled[m]]
        ax.bar(xs, [c[0] for c in cells], width, yerr=[c[1] for c in cells], capsize=2, label=m, color=palette(i % 20))
    ax.set_xticks(range(len(cols)), [c.label for c in cols], fontsize=8)
    ax.set_ylabel("mean ± std over seeds")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
