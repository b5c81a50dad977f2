"""The paper's results table (`nemo-act report`): methods x benchmark columns from many run folders.

The run folders here are constructed in the layout `nemo-act run`, `nemo-act eval` and
`nemo-act eval-reasoning` write (their summary keys); tests/test_report.py runs real pipelines."""

from __future__ import annotations

import csv
import json

import pytest

from nemo_act.report import paper_table
from nemo_act.report.paper_table import NOT_RUN


def _env(benchmark: str, split: str, score: float, completion: float, std: float = 1.0) -> dict:
    return {"benchmark": benchmark, "split": split, "score_mean": score, "score_std": std,
            "completion_mean": completion, "completion_std": std, "seeds": [0, 1, 2]}  # fmt: skip


def _run(root, name, pipeline, evals, extra=None, reasoning=None):
    d = root / name
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"pipeline": pipeline, "eval": evals}))
    for split, ev in (extra or {}).items():
        (d / f"eval_{split}").mkdir()
        (d / f"eval_{split}" / "summary.json").write_text(json.dumps(ev))
    for rset, (mean, std) in (reasoning or {}).items():
        (d / "reasoning" / rset).mkdir(parents=True)
        (d / "reasoning" / rset / "summary.json").write_text(json.dumps({"accuracy_mean": mean, "accuracy_std": std}))
    return d


@pytest.fixture
def runs(tmp_path):
    return [
        _run(tmp_path, "sw_act", "act_il_rl", {"01_act": _env("scienceworld", "test", 10, 0),
                                                "03_rl": _env("scienceworld", "test", 40.5, 5)}),  # fmt: skip
        _run(tmp_path, "sw_il", "il_rl", {"02_rl": _env("scienceworld", "test", 35.25, 0)}),
        _run(tmp_path, "alf_act", "act_il_rl", {"03_rl": _env("alfworld", "valid_seen", 90, 90)},
             extra={"valid_unseen": _env("alfworld", "valid_unseen", 88, 88)}, reasoning={"math500": (87.7, 0.5)}),
        _run(tmp_path, "alf_il", "il_rl", {"02_rl": _env("alfworld", "valid_seen", 85, 85)},
             reasoning={"math500": (87.7, 0.9), "gpqa": (44.6, 1.0)}),
        _run(tmp_path, "cot", "prompt_cot", {"init": _env("alfworld", "valid_seen", 20, 20)}),
        _run(tmp_path, "mine", "my_method", {"02_rl": _env("webshop", "test", 60, 30)}),
    ]  # fmt: skip


def test_rows_are_methods_in_the_papers_order_and_cells_merge_over_benchmarks(runs):
    rows, filled = paper_table.build(runs)
    assert rows == ["Prompting (CoT)", "IL -> RL", "ACT -> IL -> RL", "my_method"]  # unknown pipelines last
    act = filled["ACT -> IL -> RL"]
    assert act["scienceworld"] == (40.5, 1.0) and act["alfworld_id"] == (90, 1.0)  # the final checkpoint's score
    assert act["alfworld_ood"] == (88, 1.0) and act["math500"] == (87.7, 0.5) and "gpqa" not in act
    assert filled["my_method"] == {"webshop": (30, 1.0)}  # WebShop: success rate (completion), not mean reward
    assert paper_table.best(rows, filled)["math500"] == {"IL -> RL", "ACT -> IL -> RL"}  # ties are all marked


def test_a_pipeline_the_paper_has_no_row_for_is_named_by_its_stage_kinds_labels(tmp_path):
    """A pipeline of yours gets its name and its stages' labels (the stage kinds' registry entries say them)."""
    run = _run(tmp_path, "mine", "mine", {"02_il": _env("scienceworld", "test", 30, 0)})
    log = json.loads((run / "run.json").read_text())
    log["stages"] = [{"stage": "01_act_noreason", "status": "trained"}, {"stage": "02_il", "status": "skipped"}]
    (run / "run.json").write_text(json.dumps(log))
    rows, filled = paper_table.build([run])
    assert rows == ["mine (no-reasoning ACT -> IL)"] and filled[rows[0]] == {"scienceworld": (30, 1.0)}
    assert paper_table.method_label("act_il", log["stages"]) == "ACT -> IL"  # the paper's own row wins


def test_markdown_csv_and_latex_mark_the_best_and_never_write_zero_for_a_missing_cell(runs, tmp_path):
    paths = paper_table.write(runs, tmp_path / "out")
    md = paths["md"].read_text().splitlines()
    assert md[0] == ("| method | ALFWorld ID success % | ALFWorld OOD success % | WebShop success % | "
                     "ScienceWorld score | MATH-500 % | GPQA-Diamond % |")  # fmt: skip
    act = next(line for line in md if line.startswith("| ACT -> IL -> RL |"))
    assert "**40.50 ± 1.00**" in act and "**90.00 ± 1.00**" in act and "**87.70 ± 0.50**" in act
    assert act.endswith(f"| {NOT_RUN} |")  # no GPQA run: says so
    cot = next(line for line in md if line.startswith("| Prompting (CoT) |"))
    assert cot == f"| Prompting (CoT) | 20.00 ± 1.00 | {' | '.join([NOT_RUN] * 5)} |"
    with paths["csv"].open() as fh:
        rows = {r["method"]: r for r in csv.DictReader(fh)}
    assert rows["IL -> RL"]["scienceworld_mean"] == "35.2500" and rows["IL -> RL"]["scienceworld_best"] == "False"
    assert rows["ACT -> IL -> RL"]["scienceworld_best"] == "True" and rows["my_method"]["gpqa_mean"] == NOT_RUN
    tex = paths["tex"].read_text()
    assert r"\textbf{40.50 $\pm$ 1.00}" in tex and r"ACT $\to$ IL $\to$ RL" in tex and r"MATH-500 \%" in tex
    assert tex.startswith(r"\begin{tabular}{lcccccc}") and tex.rstrip().endswith(r"\end{tabular}")
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_two_runs_of_one_method_on_one_benchmark_are_refused(tmp_path):
    a = _run(tmp_path, "a", "il_rl", {"02_rl": _env("scienceworld", "test", 30, 0)})
    b = _run(tmp_path, "b", "il_rl", {"02_rl": _env("scienceworld", "test", 31, 0)})
    with pytest.raises(ValueError, match="both give 'IL -> RL' a scienceworld result"):
        paper_table.build([a, b])
    with pytest.raises(FileNotFoundError, match="no run.json"):
        paper_table.build([tmp_path])


def test_every_column_of_the_papers_layout_is_there_even_when_nobody_ran_it(tmp_path):
    run = _run(tmp_path, "sw", "il_rl", {"02_rl": _env("scienceworld", "test", 30, 0)})
    md = paper_table.write([run], tmp_path / "out")["md"].read_text().splitlines()
    assert (
        md[0].count("|") == 8
        and md[2] == f"| IL -> RL | {NOT_RUN} | {NOT_RUN} | {NOT_RUN} | **30.00 ± 1.00** | {NOT_RUN} | {NOT_RUN} |"
    )


def test_report_on_runs_outside_the_papers_columns_writes_no_empty_paper_table(tmp_path, capsys):
    """A run of your own traces has held-out selection, no env or reasoning score: ``nemo-act report`` prints its
    own table and says the paper's layout has nothing to show, instead of an empty table and a plot warning."""
    from nemo_act.cli import main

    run = _run(tmp_path, "traces_run", "act_il", {})
    (run / "selection").mkdir()
    (run / "selection" / "01_act.json").write_text(
        json.dumps({"free": {"accuracy": {"mean": 0.5, "stderr": 0.1, "n": 4}}})
    )
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert "the paper's layout: not written, no run has a result in its columns (ALFWorld ID" in out.out
    assert not list((tmp_path / "out").glob("paper_table.*")) and "UserWarning" not in out.err
    assert (tmp_path / "out" / "report.md").is_file()


def test_a_webshop_small_evaluation_is_not_the_papers_webshop_number(tmp_path):
    """An evaluation summary records its benchmark block: the small protocol's WebShop (1,000 products, synthetic
    goals) never fills the paper's WebShop column (human goals 0-499 of the full catalog); the full one does."""
    from nemo_act.config import load_config

    small = load_config(overrides=["benchmark=webshop", "benchmark.protocol=small"]).benchmark
    full = load_config(overrides=["benchmark=webshop"]).benchmark
    runs = [
        _run(tmp_path, name, "act_il", {"02_il": _env("webshop", "test", 50, 40) | {
            "benchmark_title": b.title, "benchmark_config": b.model_dump(mode="json")}})
        for name, b in (("small", small), ("full", full))
    ]  # fmt: skip
    assert small.title == "WebShop-small" and full.title == "WebShop"  # report.py's columns go by title
    assert paper_table.cells_of(runs[0]) == ("act_il", {})
    assert paper_table.cells_of(runs[1]) == ("act_il", {"webshop": (40, 1.0)})
