"""`nemo-act report` on real (tiny) pipeline runs."""

import json

import pytest
from rich.console import Console

from nemo_act.config import load_config
from nemo_act.report import load_run, plot_runs, results_table, write_markdown
from nemo_act.run.pipeline import PipelineRunner


@pytest.fixture(scope="module")
def two_runs(tiny_model_dir, sw_experts, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    runs = []
    for name, stages in [("il", "[il]"), ("il_il", "[il,il]")]:
        cfg = load_config(
            overrides=[
                f"pipeline.name={name}",
                f"pipeline.stages={stages}",
                f"pipeline.init={tiny_model_dir}",
                "pipeline.experts.tasks=[lifespan-longest-lived]",
                "pipeline.experts.split=test",
                "pipeline.experts.max_variations=1",
                "pipeline.eval.tasks=[lifespan-longest-lived]",
                "pipeline.eval.max_variations=1",
                "pipeline.eval.workers=1",
                "pipeline.eval.envs_per_worker=1",
                "benchmark.max_steps=3",
                "eval.seeds=[0,1]",
                "eval.sampling.max_new_tokens=8",
                "train.il.max_steps=2",
                "train.il.batch_size=2",
                "train.il.grad_accum=1",
                "train.il.max_length=4096",
                "train.il.logging_steps=1",
            ]
        )
        PipelineRunner(cfg, root / name, data_dir=root / "data").run()
        runs.append(root / name)
    return runs


@pytest.mark.heavy
def test_table_has_a_row_per_pipeline_with_mean_and_std(two_runs, tmp_path):
    runs = [load_run(d) for d in two_runs]
    table, rows = results_table(runs)
    assert [r["pipeline"] for r in rows] == ["il", "il_il"]
    for row, run in zip(rows, runs, strict=True):
        ev = next(iter(run["eval"].values()))
        assert len(ev["per_seed"]) == 2 and ev["episodes"] == 1
        assert row["ScienceWorld test score"] == f"{ev['score_mean']:.2f} ± {ev['score_std']:.2f}"
        assert "ScienceWorld test completion %" in row
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "il_il" in text and "ScienceWorld test score" in text
    md = write_markdown(rows, tmp_path).read_text()
    assert md.splitlines()[0].startswith("| pipeline |") and md.count("\n") == 4


@pytest.mark.heavy
def test_plot_is_written(two_runs, tmp_path):
    runs = [load_run(d) for d in two_runs]
    assert runs[1]["metrics"].keys() == {"01_il", "02_il"}
    png = plot_runs(runs, tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


@pytest.mark.heavy
def test_report_cli(two_runs, tmp_path, capsys):
    from nemo_act.cli import main

    assert main(["report", *map(str, two_runs), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "il_il" in out and (tmp_path / "report.png").exists() and (tmp_path / "report.md").exists()


def test_unfinished_run_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run.json"):
        load_run(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"pipeline": "x", "stages": []}))
    assert load_run(tmp_path)["metrics"] == {}


def test_a_corrupt_run_json_is_named_in_one_line_with_what_to_do(tmp_path, capsys):
    """Issue 45: a run.json cut short or edited badly was read into a bare JSON error without its name."""
    from nemo_act.cli import main
    from nemo_act.data.io import RecordError
    from nemo_act.report import paper_table

    (tmp_path / "run.json").write_text('{"pipeline": "il", "stages": [')
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{tmp_path / 'run.json'}:1: not valid JSON" in err
    assert "run the same command again" in err
    with pytest.raises(RecordError, match="run.json:1: not valid JSON"):
        paper_table.cells_of(tmp_path)


def test_failed_episodes_are_named_beside_the_score():
    """An episode whose env kept dying scores 0; the table says how many there were, not only the lower mean."""
    from nemo_act.report import results_table

    ev = {"benchmark": "scienceworld", "split": "test", "score_mean": 40.0, "score_std": 1.0,
          "completion_mean": 50.0, "completion_std": 0.0}  # fmt: skip
    runs = [{"pipeline": "a", "eval": {"final": {**ev, "failed": 2}}}, {"pipeline": "b", "eval": {"final": ev}}]
    _, rows = results_table(runs)
    assert rows[0]["scienceworld test score"] == "40.00 ± 1.00 (2 failed)"
    assert rows[1]["scienceworld test score"] == "40.00 ± 1.00"
