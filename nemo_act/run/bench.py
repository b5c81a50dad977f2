"""``nemo-act bench``: does ACT help here? Arms x training seeds from one warm-up, one fold, intervals.

Folder (``run_dir``)::

    data/                       experts, held-out experts, their pairs: one set for every arm and seed
    tiny-model/, warmup/        the initial policy (:mod:`nemo_act.run.warmup`), every arm's start
    arms/<arm>/seed_<s>/        one ``nemo-act run`` folder per arm and training seed (resumed like any run), its
                                scores in eval/<split>/<stage>/: dev and test of one trained cell side by side, and
                                cell.<split>.json: the cell's result in one small file that travels (below)
    fingerprint.json            what every cell of this folder starts from: warm-up, experts, held-out pairs, fold
    report/<split>/bench.md     the table (also .csv), the plot (.png) and every number behind them (.json), per fold
    test_settings.yaml          the config the test fold was first scored with (the guard, below)

Every cell (arm, seed) is the arm's pipeline file (``conf/pipeline/<arm>.yaml``) on top of the bench config, started
from the warm-up checkpoint, trained with ``seed`` = that training seed (data order, sampling) and evaluated with
that seed on the same episodes of ``bench.split``; then held-out selection of its final checkpoint on the shared
held-out pairs. Cells are independent runs: ``--arm``/``--seed`` runs one (a cluster job each), ``--report`` tables
what is finished.

Cells that travel: a finished cell writes ``cell.<split>.json`` (its per-episode scores, held-out selection, the
weights it was scored with, and the fingerprints of what made it: the warm-up checkpoint's weights, the experts and
held-out pairs files, the fold, the arm's settings). ``--report --cells-from DIR`` tables the cells of this folder
together with every such file under DIR (another folder, another machine, a results folder in a repository: the
files are small and carry no checkpoint). A cell whose fingerprints differ from this folder's (another warm-up, other
experts, another fold, other settings for its arm) is refused by name; two different results for one cell are an
error; the configured cells found nowhere are named.

The fold guard: settings are chosen on ``dev``; ``bench.split=test`` scores the test fold once per settings. The
first test scoring writes ``test_settings.yaml``; a later call whose config differs from it (any key but ``run_dir``)
is refused, naming the keys, so a test fold is never scored again after a change of settings in the same folder.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from nemo_act.config.load import to_yaml
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import RUN_REMEDY, read_json, read_jsonl, write_text_atomic
from nemo_act.data.manifest import file_sha256
from nemo_act.evaluation.rollout import EpisodeRecord
from nemo_act.run.cache import weights_digest
from nemo_act.run.demo import _pipeline_cfg, markdown_table
from nemo_act.run.pipeline import PipelineRunner
from nemo_act.run.warmup import warm_up

TEST_SETTINGS = "test_settings.yaml"
FINGERPRINT = "fingerprint.json"


class BenchError(ValueError):
    """A bench that cannot run as asked (the message says why and what to do)."""


def cell_config(cfg: ExperimentConfig, arm: str, seed: int, init: str) -> ExperimentConfig:
    """The config of one cell: the arm's pipeline file on the bench config, from ``init``, trained with ``seed``."""
    cell = _pipeline_cfg(cfg, arm, init)
    # the runner evaluates nothing itself: the bench scores the final checkpoint into eval/<split>/ (Bench.run_cell)
    ev = cell.pipeline.eval.model_copy(update={"split": cfg.bench.split, "stages": "none"})
    return cell.model_copy(
        update={
            "seed": seed,
            "eval": cell.eval.model_copy(update={"seeds": [seed]}),
            "pipeline": cell.pipeline.model_copy(update={"eval": ev}),
        }
    )


def check_folds(cfg: ExperimentConfig) -> None:
    """Refuse a bench whose experts or pairs come from a fold it scores, or from the test fold.

    Experts (training data) come neither from the scored fold nor from ``test``; held-out pairs (evaluation only:
    selection accuracy) may share the dev fold with dev scoring, never the test fold.

    Raises:
        BenchError: What reads the wrong fold, and what to do.
    """
    reads = {"experts": cfg.pipeline.experts, "heldout": cfg.pipeline.heldout}
    for which, src in reads.items():
        if src.path is not None:
            raise BenchError(
                f"pipeline.{which}.path is set: the bench collects its experts from the benchmark's folds, so it can "
                "check that no scored episode is a training one; unset it"
            )
        if src.split == "test" or (which == "experts" and src.split == cfg.bench.split):
            raise BenchError(
                f"pipeline.{which}.split is '{src.split}': the bench never trains or builds pairs on the fold it "
                f"scores (bench.split={cfg.bench.split}) or on the test fold; take {which} from train or dev"
            )


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def guard_test_fold(cfg: ExperimentConfig, out: Path) -> None:
    """Record the settings the test fold is scored with, or refuse other settings (see the module docstring).

    Raises:
        BenchError: The test fold of ``out`` was scored with other settings.
    """
    if cfg.bench.split != "test":
        return
    path = out / TEST_SETTINGS
    now = cfg.model_dump(mode="json")
    now.pop("run_dir")
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, yaml.safe_dump(now, sort_keys=True))
        return
    before = yaml.safe_load(path.read_text(encoding="utf-8"))
    a, b = _flat(before), _flat(now)
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    if changed:
        shown = ", ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in changed[:5])
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        raise BenchError(
            f"{path}: the test fold of this bench was scored with other settings ({shown}{more}). A test fold is "
            "scored once per settings: choose settings with bench.split=dev, then score the test fold in a new "
            "run_dir= and report both"
        )


@dataclass(frozen=True)
class Cell:
    """One arm trained with one seed: its scores per episode and its held-out selection."""

    arm: str
    seed: int
    episodes: list[str]
    success: list[float]
    score: list[float]
    selection: dict[str, float] | None
    weights: dict[str, str]  # sha256 of the weight files it was scored with (run.cache.weights_digest)
    checkpoint: str
    fingerprint: dict[str, str] = field(default_factory=dict)  # what made it (Bench.fingerprint, settings_digest)
    origin: str = ""  # the cell file it was read from ("": this bench folder's run)


def cell_file(folder: Path, split: str) -> Path:
    """The small file holding a cell's result on ``split`` (written when it finished; read by ``--cells-from``)."""
    return folder / f"cell.{split}.json"


def settings_digest(cfg: ExperimentConfig, arm: str) -> str:
    """A digest of what one arm's cells are trained and scored with: its cell config, less the seed and the places.

    The places differ between machines and say nothing of a result: the run folder, the start (the warm-up's weights
    are in the fingerprint), where the model and the benchmark's data are (their weights and the experts file are).
    """
    tree = cell_config(cfg, arm, 0, "").model_dump(mode="json")
    for key in ("run_dir", "seed"):
        tree.pop(key)
    tree["model"].pop("name_or_path")
    tree["benchmark"].pop("data_dir", None)
    tree["pipeline"].pop("init")
    tree["eval"].pop("seeds")
    tree["bench"] = {k: v for k, v in tree["bench"].items() if k not in ("arms", "seeds", "baseline", "bootstrap")}
    return hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest()


def read_cell_file(path: Path) -> Cell:
    """A cell file (``cell.<split>.json``) as a :class:`Cell`, its origin the file.

    Raises:
        BenchError: The file is not a cell file (the message names it and the fields wrong or missing).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise BenchError(f"{path}: not a readable cell file ({err})") from None
    names = {f.name for f in fields(Cell)} - {"origin"}
    if not isinstance(data, dict) or set(data) != names:
        got = set(data) if isinstance(data, dict) else set()
        raise BenchError(
            f"{path}: not a cell file: fields missing {sorted(names - got)}, unknown {sorted(got - names)}"
        )
    return Cell(**data, origin=str(path))


def eval_name(split: str, checkpoint: str) -> str:
    """Where a cell's evaluation on ``split`` lives, under its ``eval/``: ``<split>/<stage>`` (dev and test apart)."""
    return f"{split}/{Path(checkpoint).name}"


def read_cell(folder: Path, arm: str, seed: int, split: str) -> Cell | None:
    """A finished cell's results on ``split`` (None when its run or that evaluation has not finished)."""
    run = folder / "run.json"
    if not run.exists():
        return None
    final = read_json(run, RUN_REMEDY)["final_checkpoint"]
    scored = folder / "eval" / eval_name(split, final)
    if not (scored / "summary.json").exists():
        return None
    summary = read_json(scored / "summary.json")
    records = sorted(read_jsonl(scored / f"seed_{seed}" / "episodes.jsonl", EpisodeRecord),
                     key=lambda r: (r.task_id, r.variation))  # fmt: skip
    sel_path = folder / "selection" / "final.json"
    selection = None
    if sel_path.exists():
        free = read_json(sel_path)["free"]
        selection = {"accuracy": free["accuracy"]["value"], "neither": free["named_neither"]["value"]}
    return Cell(
        arm=arm,
        seed=seed,
        episodes=[f"{r.task_id}#{r.variation}" for r in records],
        success=[float(r.success) for r in records],
        score=[r.max_score / 100 for r in records],
        selection=selection,
        weights=summary.get("weights", {}),
        checkpoint=final,
    )


def _short(digest: str) -> str:
    return digest[:12] if len(digest) == 64 else digest


def admit(cells: list[Cell], reference: dict[str, str], settings: dict[str, str]) -> tuple[list[Cell], list[str]]:
    """The cells made as this bench's are, one per (arm, seed); a line for each one refused.

    Args:
        cells: This folder's cells first, then those of ``--cells-from``.
        reference: This bench's fingerprint (:meth:`Bench.fingerprint`); {}: the one most cells share.
        settings: Each configured arm's :func:`settings_digest`.

    Returns:
        The admitted cells, and one line per refused cell (which, from where, what differs).

    Raises:
        BenchError: One (arm, seed) with two different results.
    """
    if not reference:
        common = Counter(json.dumps(c.fingerprint.get("start", {}), sort_keys=True) for c in cells).most_common(1)
        reference = json.loads(common[0][0]) if common else {}
    kept: dict[tuple[str, int], Cell] = {}
    refused = []
    for c in cells:
        where = c.origin or "this folder"
        start = c.fingerprint.get("start", {})
        differ = [f"its {k} {_short(str(start.get(k)))} is not this bench's ({_short(v)})"
                  for k, v in reference.items() if start.get(k) != v]  # fmt: skip
        if c.arm not in settings:
            differ.append(f"arm {c.arm} is not one of bench.arms")
        elif c.fingerprint.get("settings") != settings[c.arm]:
            got = _short(str(c.fingerprint.get("settings")))
            differ.append(f"its {c.arm} settings {got} are not this bench's ({_short(settings[c.arm])})")
        if differ:
            refused.append(f"{c.arm} seed {c.seed} ({where}): " + "; ".join(differ))
            continue
        twin = kept.get((c.arm, c.seed))
        if twin is None:
            kept[(c.arm, c.seed)] = c
        elif (twin.episodes, twin.success, twin.score) != (c.episodes, c.success, c.score):
            raise BenchError(
                f"{c.arm} seed {c.seed} has two different results: {twin.origin or 'this folder'} and {where}; "
                "keep one of them"
            )
    return list(kept.values()), refused


def _matrix(cells: list[Cell], field: str) -> Any:
    import numpy as np

    return np.array([getattr(c, field) for c in sorted(cells, key=lambda c: c.seed)])


def analyse(cells: list[Cell], cfg: ExperimentConfig) -> dict[str, Any]:
    """Per arm: success and score with intervals; against the baseline: paired difference, improvement, verdict.

    Only seeds finished by every arm enter (a paired comparison needs both); the rest are named.

    Raises:
        BenchError: Cells of one bench scored different episodes, or no seed is finished by every arm.
    """
    from nemo_act.report import bench_stats

    b = cfg.bench
    by_arm = {arm: {c.seed: c for c in cells if c.arm == arm} for arm in b.arms}
    seeds = sorted(set.intersection(*(set(d) for d in by_arm.values())))
    if not seeds:
        raise BenchError("no training seed is finished by every arm yet: nothing to compare")
    episodes = by_arm[b.baseline][seeds[0]].episodes
    for arm, done in by_arm.items():
        for s in seeds:
            if done[s].episodes != episodes:
                raise BenchError(f"arm {arm} seed {s} scored other episodes than {b.baseline} seed {seeds[0]}")
    boot = (b.bootstrap.reps, b.bootstrap.confidence, b.bootstrap.seed)
    base = {f: _matrix([by_arm[b.baseline][s] for s in seeds], f) for f in ("success", "score")}
    arms: dict[str, Any] = {}
    for arm in b.arms:
        mine = [by_arm[arm][s] for s in seeds]
        row: dict[str, Any] = {
            "success": asdict(bench_stats.mean_interval(_matrix(mine, "success"), *boot)),
            "score": asdict(bench_stats.mean_interval(_matrix(mine, "score"), *boot)),
            "per_seed_success": [sum(c.success) / len(c.success) for c in mine],
            "per_seed_score": [sum(c.score) / len(c.score) for c in mine],
            "weights": {str(c.seed): c.weights for c in mine},  # what each seed's scores were played with
        }
        sels = [c.selection for c in mine if c.selection is not None]
        if sels:
            row["selection_accuracy"] = sum(s["accuracy"] for s in sels) / len(sels)
            row["selection_neither"] = sum(s["neither"] for s in sels) / len(sels)
        if arm != b.baseline:
            for field in ("success", "score"):
                diff = bench_stats.paired_difference(_matrix(mine, field), base[field], *boot)
                poi = bench_stats.probability_of_improvement(_matrix(mine, field), base[field], *boot)
                row[f"{field}_difference"] = asdict(diff)
                row[f"{field}_improvement"] = asdict(poi)
            row["verdict"] = bench_stats.verdict(bench_stats.Estimate(**row["success_difference"]))
        arms[arm] = row
    missing = sorted(f"{c.arm} seed {c.seed}" for c in cells if c.seed not in seeds)
    return {
        "split": b.split,
        "baseline": b.baseline,
        "seeds": seeds,
        "episodes": len(episodes),
        "confidence": b.bootstrap.confidence,
        "reps": b.bootstrap.reps,
        "arms": arms,
        "left_out": missing,
    }


def _ci(e: dict[str, float], scale: float = 100, digits: int = 1) -> str:
    return f"{scale * e['value']:.{digits}f} [{scale * e['low']:.{digits}f}, {scale * e['high']:.{digits}f}]"


COLUMNS = ["arm", "success %", "score", "Δ success vs baseline (pts)", "P(improvement)", "verdict",
           "held-out selection %", "named neither %"]  # fmt: skip


def table_rows(result: dict[str, Any]) -> list[list[str]]:
    """The bench table's rows (one per arm), as text."""
    rows = []
    for arm, r in result["arms"].items():
        diff = r.get("success_difference")
        rows.append(
            [
                arm + (" (baseline)" if arm == result["baseline"] else ""),
                _ci(r["success"]),
                _ci(r["score"]),
                _ci(diff) if diff else "-",
                _ci(r["success_improvement"], scale=1, digits=2) if diff else "-",
                r.get("verdict", "-"),
                f"{100 * r['selection_accuracy']:.1f}" if "selection_accuracy" in r else "-",
                f"{100 * r['selection_neither']:.1f}" if "selection_neither" in r else "-",
            ]
        )
    return rows


def caption(result: dict[str, Any]) -> str:
    """What the table's numbers are, in one paragraph."""
    conf = round(100 * result["confidence"])
    return (
        f"{result['split']} fold, {len(result['seeds'])} training seeds x {result['episodes']} episodes per arm; "
        f"[{conf}% stratified-bootstrap interval over seeds and episodes, {result['reps']} replications (rliable)]. "
        f"Δ: paired difference to {result['baseline']} (same seed, same episode); P(improvement): probability "
        "that the arm beats the baseline on an episode (0.5 = none); verdict: whether Δ's interval excludes 0. "
        "Held-out selection: free choice on held-out pairs, mean over seeds."
    )


def write_report(result: dict[str, Any], out: Path) -> dict[str, Path]:
    """Write ``bench.json``, ``bench.md``, ``bench.csv`` and ``bench.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = table_rows(result)
    paths = {k: out / f"bench.{k}" for k in ("json", "md", "csv", "png")}
    write_text_atomic(paths["json"], json.dumps(result, indent=2) + "\n")
    write_text_atomic(paths["md"], f"{markdown_table(COLUMNS, rows)}\n\n{caption(result)}\n")
    buf = io.StringIO()
    csv.writer(buf).writerows([COLUMNS, *rows])
    write_text_atomic(paths["csv"], buf.getvalue())
    plot(result, paths["png"])
    return paths


def plot(result: dict[str, Any], path: Path) -> None:
    """Per-seed success (dots) and each arm's interval; beside it each arm's paired difference to the baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(result["arms"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.6 * len(arms) + 2))
    for i, arm in enumerate(arms):
        r = result["arms"][arm]
        s = r["success"]
        left.plot([100 * s["low"], 100 * s["high"]], [i, i], color="C0", lw=3, alpha=0.5)
        left.plot([100 * s["value"]], [i], "|", color="C0", ms=14, mew=2)
        left.plot([100 * v for v in r["per_seed_success"]], [i] * len(r["per_seed_success"]), "o", color="k", ms=4)
        if "success_difference" in r:
            d = r["success_difference"]
            right.plot([100 * d["low"], 100 * d["high"]], [i, i], color="C1", lw=3, alpha=0.6)
            right.plot([100 * d["value"]], [i], "|", color="C1", ms=14, mew=2)
    for ax in (left, right):
        ax.set_yticks(range(len(arms)), arms)
        ax.set_ylim(-0.5, len(arms) - 0.5)
        ax.invert_yaxis()
    left.set_xlabel(f"success % on {result['split']} (dots: seeds; bar: {round(100 * result['confidence'])}% interval)")
    right.axvline(0, color="grey", lw=1)
    right.set_xlabel(f"paired difference to {result['baseline']}, points")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_table(result: dict[str, Any], console: Console) -> None:
    """The bench table on the console."""
    table = Table(title=f"bench: {result['split']} fold", caption=caption(result), caption_justify="left")
    for i, col in enumerate(COLUMNS):
        table.add_column(col, justify="left" if i in (0, 5) else "right")
    for row in table_rows(result):
        table.add_row(*row)
    console.print(table)


class Bench:
    """One bench folder: the shared start, the cells, the report.

    Args:
        cfg: The bench config (``bench`` block, the data and model settings every arm shares).
        out: The bench folder.
        console: Where progress goes.
    """

    def __init__(self, cfg: ExperimentConfig, out: Path, console: Console):
        self.cfg = cfg
        self.out = out
        self.data = out / "data"
        self.console = console

    def cell_dir(self, arm: str, seed: int) -> Path:
        """The run folder of one cell."""
        return self.out / "arms" / arm / f"seed_{seed}"

    def prepare(self) -> tuple[str, Path]:
        """The shared start: experts, the warm-up checkpoint, held-out pairs sampled from it (each reused).

        Writes ``fingerprint.json``: what every cell of this folder starts from (:meth:`fingerprint`).
        """
        warm = warm_up(self.cfg, self.out, self.data, self.console)
        runner = PipelineRunner(cell_config(self.cfg, self.cfg.bench.baseline, 0, warm.init), self.out / "warmup",
                                data_dir=self.data, console=self.console)  # fmt: skip
        heldout_pairs = runner.pairs(warm.heldout, "heldout_pairs.jsonl")
        start = self.fingerprint(warm.init, warm.experts, heldout_pairs)
        write_text_atomic(self.out / FINGERPRINT, json.dumps(start, indent=2, sort_keys=True) + "\n")
        return warm.init, heldout_pairs

    def fingerprint(self, init: str, experts: Path, heldout_pairs: Path) -> dict[str, str]:
        """What a cell starts from and is scored on: the warm-up's weights, the experts, held-out pairs, the fold."""
        weights = json.dumps(weights_digest(init), sort_keys=True)
        return {
            "warm-up": hashlib.sha256(weights.encode()).hexdigest(),
            "experts": file_sha256(experts),
            "held-out pairs": file_sha256(heldout_pairs),
            "fold": f"{self.cfg.benchmark.name} {self.cfg.bench.split}",
        }

    def reference(self) -> dict[str, str]:
        """The bench folder's fingerprint ({} where it was never prepared: a folder that only gathers cell files)."""
        path = self.out / FINGERPRINT
        return read_json(path) if path.exists() else {}

    def run_cell(self, arm: str, seed: int, init: str, heldout_pairs: Path) -> None:
        """Train one cell (reused when finished), score it on ``bench.split``, measure its held-out selection.

        The final checkpoint's scores go to ``eval/<split>/<stage>/``: a dev score and a test score of one trained
        cell live side by side.
        """
        runner = PipelineRunner(cell_config(self.cfg, arm, seed, init), self.cell_dir(arm, seed),
                                data_dir=self.data, console=self.console)  # fmt: skip
        final = runner.run()["final_checkpoint"]
        split = self.cfg.bench.split
        runner.evaluate(eval_name(split, final), final)
        runner.selection("final", final, heldout_pairs)
        cell = read_cell(self.cell_dir(arm, seed), arm, seed, split)
        assert cell is not None, "a cell just scored has its files"
        made = {"start": self.reference(), "settings": settings_digest(self.cfg, arm)}
        data = {k: v for k, v in asdict(replace(cell, fingerprint=made)).items() if k != "origin"}
        write_text_atomic(cell_file(self.cell_dir(arm, seed), split), json.dumps(data, indent=1) + "\n")

    def cells(self) -> list[Cell]:
        """The finished cells of the configured arms and seeds, on ``bench.split``.

        A cell whose checkpoint no longer holds the weights it was scored with is left out, with a line saying how to
        score it again (the runner redoes such an evaluation: :func:`nemo_act.run.cache.decide`).
        """
        b = self.cfg.bench
        found = [read_cell(self.cell_dir(a, s), a, s, b.split) for a in b.arms for s in b.seeds]
        cells = []
        for c in found:
            if c is None:
                continue
            if c.weights != weights_digest(c.checkpoint):
                self.console.print(
                    f"[yellow]left out[/] {c.arm} seed {c.seed}: its checkpoint's weights are not the ones it was "
                    f"scored with; score it again: nemo-act bench <config> --arm {c.arm} --seed {c.seed}"
                )
                continue
            cells.append(c)
        return cells

    def gathered(self, cells_from: list[Path]) -> list[Cell]:
        """The bench folder's finished cells, then every cell file of ``split`` under the ``cells_from`` folders.

        The folder's own cells carry its fingerprint where their cell file is missing (a cell scored before
        cell files existed).

        Raises:
            BenchError: A ``cells_from`` folder that does not exist, or a file there that is no cell file.
        """
        split = self.cfg.bench.split
        made_here = {"start": self.reference()}
        here = []
        for c in self.cells():
            path = cell_file(self.cell_dir(c.arm, c.seed), split)
            recorded = read_cell_file(path).fingerprint if path.exists() else {}
            fingerprint = recorded or {**made_here, "settings": settings_digest(self.cfg, c.arm)}
            here.append(replace(c, fingerprint=fingerprint))
        away = []
        for folder in cells_from:
            if not folder.is_dir():
                raise BenchError(f"--cells-from {folder}: no such folder")
            away += [read_cell_file(f) for f in sorted(folder.rglob(cell_file(Path(), split).name))]
        return here + away

    def report(self, cells_from: list[Path] | None = None) -> dict[str, Any]:
        """Analyse the finished cells (and those of ``cells_from``), print the table and write the report files."""
        b = self.cfg.bench
        settings = {arm: settings_digest(self.cfg, arm) for arm in b.arms}
        cells, refused = admit(self.gathered(cells_from or []), self.reference(), settings)
        for line in refused:
            self.console.print(f"[yellow]refused[/] {line}")
        have = {(c.arm, c.seed) for c in cells}
        missing = [f"{a} seed {s}" for a in b.arms for s in b.seeds if (a, s) not in have]
        if missing:
            self.console.print(f"[yellow]missing[/] (found in no folder): {', '.join(missing)}")
        result = analyse(cells, self.cfg)
        result["missing"] = missing
        result["refused"] = refused
        paths = write_report(result, self.out / "report" / b.split)
        print_table(result, self.console)
        if result["left_out"]:
            self.console.print(f"[yellow]left out[/] (their seed is not finished by every arm): {result['left_out']}")
        self.console.print(f"report: {paths['md']}, {paths['csv']}, {paths['png']}")
        return result


def run_bench(
    cfg: ExperimentConfig,
    out: Path,
    only: tuple[str, int] | None = None,
    report_only: bool = False,
    prepare_only: bool = False,
    cells_from: list[Path] | None = None,
) -> dict[str, Any] | None:
    """Run ``nemo-act bench``: the shared start, every cell (or ``only`` one), the report.

    Args:
        cfg: The bench config.
        out: The bench folder.
        only: ``(arm, seed)``: run that cell alone (no report), e.g. one cluster job per cell.
        report_only: Table the finished cells; train nothing.
        prepare_only: The shared start alone (before the cells run as separate jobs).
        cells_from: With ``report_only``: folders whose cell files join this folder's cells.

    Returns:
        The analysis (None after a single cell).

    Raises:
        BenchError: The config cannot be benched as asked (folds, test guard, an arm or seed not configured).
    """
    console = Console(width=170)
    bench = Bench(cfg, out, console)
    if report_only:
        return bench.report(cells_from)
    if cells_from:
        raise BenchError("--cells-from goes with --report: it tables cells made elsewhere, it trains none")

    check_folds(cfg)
    guard_test_fold(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "config.yaml", to_yaml(cfg))
    t0 = time.time()
    init, heldout_pairs = bench.prepare()
    if prepare_only:
        return None
    todo = [(a, s) for a in cfg.bench.arms for s in cfg.bench.seeds]
    if only is not None:
        if only not in todo:
            raise BenchError(f"--arm {only[0]} --seed {only[1]}: not a cell of bench.arms x bench.seeds")
        todo = [only]
    for i, (arm, seed) in enumerate(todo, start=1):
        console.rule(f"[bold]arm {arm}, training seed {seed} ({i}/{len(todo)})")
        bench.run_cell(arm, seed, init, heldout_pairs)
    if only is not None:
        return None
    result = bench.report()
    console.print(f"bench: {(time.time() - t0) / 60:.1f} min")
    return result
