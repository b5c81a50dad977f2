"""Results of pipeline runs (``nemo-act report``): a table like the paper's and plots.

Rows are pipelines (one run folder each); columns are benchmark metrics as mean +- std over the
evaluation seeds, plus the held-out ACT selection accuracy where the pipeline has an ACT stage.
Plots: training curves of every stage (loss, total reward, selection accuracy per step) and the
final scores of every run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from nemo_act.data.io import RUN_REMEDY, read_json


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """Read a run folder's ``run.json`` and its stages' metrics.

    Raises:
        FileNotFoundError: The folder has no ``run.json`` (the run has not finished).
    """
    run_dir = Path(run_dir)
    path = run_dir / "run.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no run.json (is this a finished `nemo-act run` folder?)")
    run = read_json(path, RUN_REMEDY)
    run["dir"] = str(run_dir)
    run["metrics"] = {}
    for stage in sorted((run_dir / "stages").glob("*")):
        metrics = stage / "metrics.jsonl"
        if metrics.exists():
            run["metrics"][stage.name] = [json.loads(line) for line in metrics.read_text().splitlines() if line]
    return run


def _pm(mean: float, std: float) -> str:
    return f"{mean:.2f} ± {std:.2f}"


def results_table(runs: Sequence[dict[str, Any]]) -> tuple[Table, list[dict[str, str]]]:
    """Build the results table (and its rows as dicts, for CSV/markdown)."""
    columns: list[str] = []
    rows: list[dict[str, str]] = []
    for run in runs:
        row = {"pipeline": run["pipeline"]}
        for ev in (run.get("eval") or {}).values():
            bench = ev.get("benchmark_title", ev["benchmark"])  # the benchmark config's title
            key = f"{bench} {ev['split']}"
            failed = ev.get("failed", 0)  # episodes that could not be played count 0: say so beside the score
            row[f"{key} score"] = _pm(ev["score_mean"], ev["score_std"]) + (f" ({failed} failed)" if failed else "")
            row[f"{key} completion %"] = _pm(ev["completion_mean"], ev["completion_std"])
        sel = run.get("selection") or {}
        act = [k for k in sel if k != "init"]
        if act:
            acc = sel[act[-1]]["free"]["accuracy"]
            row["held-out selection acc %"] = f"{100 * acc['value']:.1f} ± {100 * acc['stderr']:.1f}"
        for key in row:
            if key not in columns and key != "pipeline":
                columns.append(key)
        rows.append(row)
    table = Table(title="nemo-act results (mean ± std over seeds; selection: ± standard error)")
    table.add_column("pipeline")
    for col in columns:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(row["pipeline"], *(row.get(c, "-") for c in columns))
    return table, rows


def _curve(history: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    pts = [(h["step"], h[key]) for h in history if key in h and "step" in h]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_runs(runs: Sequence[dict[str, Any]], out: str | Path) -> Path:
    """Write ``report.png``: training curves per stage and final scores per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    panels = [("loss", "loss"), ("reward", "reward (total)"), ("rewards/selection_accuracy/mean", "selection accuracy")]
    curves = [f"{run['pipeline']}:{stage}" for run in runs for stage in run["metrics"]]
    palette = plt.get_cmap("tab10")
    color = {label: palette(i % 10) for i, label in enumerate(curves)}  # one colour per stage in every panel
    for ax, (key, title) in zip(axes[:3], panels, strict=True):
        for run in runs:
            for stage, history in run["metrics"].items():
                xs, ys = _curve(history, key)
                if xs:
                    label = f"{run['pipeline']}:{stage}"
                    ax.plot(xs, ys, marker=".", label=label, color=color[label])
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        if ax.has_data():
            ax.legend(fontsize=7)
    ax = axes[3]
    labels, means, stds = [], [], []
    for run in runs:
        for stage, ev in (run.get("eval") or {}).items():
            labels.append(f"{run['pipeline']}\n{stage}")
            means.append(ev["score_mean"])
            stds.append(ev["score_std"])
    if labels:
        ax.bar(range(len(labels)), means, yerr=stds, capsize=4)
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_title("final score (mean ± std over seeds)")
    fig.tight_layout()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_markdown(rows: Sequence[dict[str, str]], out: str | Path) -> Path:
    """Write the table as ``report.md``."""
    cols = ["pipeline"] + [c for c in dict.fromkeys(k for r in rows for k in r) if c != "pipeline"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(r.get(c, "-") for c in cols) + " |" for r in rows]
    path = Path(out) / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
