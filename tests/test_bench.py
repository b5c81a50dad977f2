"""``nemo-act bench`` (issue 44): its statistics against hand computations and scipy, its fold rules, its test-fold
guard, the matched-compute arm, and the smoke bench end to end on the real TextWorld-Express (a rerun of one cell
repeats its numbers exactly).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import java_options_without_class_archive

from nemo_act.config import load_config
from nemo_act.report import bench_stats
from nemo_act.run import bench
from nemo_act.run.bench import BenchError, Cell

# fixed numbers: 3 training seeds x 4 episodes, success 0/1
ARM = np.array([[1, 1, 0, 1], [1, 0, 0, 1], [1, 1, 1, 0]], dtype=float)
BASE = np.array([[1, 0, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0]], dtype=float)


def test_paired_difference_and_improvement_are_the_hand_computed_numbers():
    # difference: mean over cells of arm - base = (8 - 4) / 12 by hand
    diff = bench_stats.paired_difference(ARM, BASE, reps=500, confidence=0.95, seed=0)
    assert diff.value == pytest.approx(4 / 12)
    assert diff.low <= diff.value <= diff.high
    # improvement, episode by episode over the 3 x 3 seed pairs (ties count 1/2):
    # ep 0: arm (1,1,1) vs base (1,0,1): 3 wins, 6 ties -> (3 + 3) / 9; ep 1: arm (1,0,1) vs (0,0,0): 6 wins, 3 ties
    # -> 7.5 / 9; ep 2: arm (0,0,1) vs (0,1,0): 2 wins, 5 ties, 2 losses -> 4.5 / 9; ep 3: arm (1,1,0) vs (0,1,0):
    # 4 wins, 4 ties, 1 loss -> 6 / 9
    hand = np.mean([6 / 9, 7.5 / 9, 4.5 / 9, 6 / 9])
    assert bench_stats.improvement(ARM, BASE) == pytest.approx(hand)
    poi = bench_stats.probability_of_improvement(ARM, BASE, reps=200, confidence=0.95, seed=0)
    assert poi.value == pytest.approx(hand) and poi.low <= poi.value <= poi.high


def test_improvement_is_rliables_probability_of_improvement():
    from rliable import metrics

    rng = np.random.default_rng(3)
    for shape_x, shape_y in [((5, 40), (5, 40)), ((3, 7), (4, 7))]:
        x = rng.integers(0, 3, shape_x).astype(float)
        y = rng.integers(0, 3, shape_y).astype(float)
        assert bench_stats.improvement(x, y) == pytest.approx(metrics.probability_of_improvement(x, y))
    same = rng.random((4, 6))
    assert bench_stats.improvement(same, same) == pytest.approx(0.5)


def test_the_interval_is_scipys_percentile_bootstrap_where_the_two_coincide():
    """With one episode, rliable's stratified bootstrap is the plain bootstrap over seeds: scipy's agrees."""
    from scipy import stats

    values = np.array([0.1, 0.35, 0.4, 0.55, 0.6, 0.62, 0.8, 0.9])
    ours = bench_stats.mean_interval(values[:, None], reps=20000, confidence=0.95, seed=0)
    theirs = stats.bootstrap((values,), np.mean, n_resamples=20000, method="percentile", confidence_level=0.95,
                             rng=np.random.default_rng(0)).confidence_interval  # fmt: skip
    assert ours.value == pytest.approx(values.mean())
    assert ours.low == pytest.approx(theirs.low, abs=0.01) and ours.high == pytest.approx(theirs.high, abs=0.01)


def test_intervals_repeat_and_leave_numpys_generator_alone():
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = bench_stats.mean_interval(ARM, reps=300, confidence=0.9, seed=7)
    b = bench_stats.mean_interval(ARM, reps=300, confidence=0.9, seed=7)
    assert a == b
    assert (np.random.get_state()[1] == before).all()
    assert bench_stats.mean_interval(ARM, reps=300, confidence=0.9, seed=8) != a


def test_the_verdict_reads_the_interval_of_the_difference():
    E = bench_stats.Estimate
    assert bench_stats.verdict(E(0.1, 0.02, 0.2)) == "better"
    assert bench_stats.verdict(E(-0.1, -0.2, -0.01)) == "worse"
    assert bench_stats.verdict(E(0.1, -0.02, 0.2)) == "no difference at this size"
    with pytest.raises(ValueError, match=r"are \(3, 4\), the baseline.s \(2, 4\)"):
        bench_stats.paired_difference(ARM, BASE[:2], reps=10, confidence=0.95, seed=0)


def _cfg(*overrides: str):
    return load_config("conf/bench/smoke.yaml", list(overrides))


def _cell(arm: str, seed: int, success: list[float]) -> Cell:
    return Cell(arm, seed, [f"g#{i}" for i in range(len(success))], success, success, None, {}, "")


def test_analysis_compares_the_seeds_every_arm_finished_and_names_the_rest():
    cfg = _cfg("bench.seeds=[0,1,2]", "bench.bootstrap.reps=100")
    cells = [_cell(a, s, list(ARM[s] if a == "act_il" else BASE[s])) for a in ("il", "act_il") for s in range(3)]
    cells += [_cell("il_il", 0, list(BASE[0])), _cell("il_il", 1, list(BASE[1]))]
    result = bench.analyse(cells, cfg)
    assert result["seeds"] == [0, 1] and result["left_out"] == ["act_il seed 2", "il seed 2"]
    act = result["arms"]["act_il"]
    assert act["success_difference"]["value"] == pytest.approx((ARM[:2] - BASE[:2]).mean())
    assert act["per_seed_success"] == pytest.approx([0.75, 0.5])
    assert result["arms"]["il_il"]["success_difference"]["value"] == 0 and "verdict" not in result["arms"]["il"]
    cells[0] = Cell("il", 0, ["other#0"] * 4, list(BASE[0]), list(BASE[0]), None, {}, "")
    with pytest.raises(BenchError, match="other episodes"):
        bench.analyse(cells, cfg)


START = {"warm-up": "a" * 64, "experts": "b" * 64, "held-out pairs": "c" * 64, "fold": "textworld_express dev"}


def test_cells_from_elsewhere_join_when_made_alike_and_are_refused_by_name_otherwise(tmp_path):
    """The check ``--cells-from`` runs on every cell file, on files written as a finished cell writes them."""
    from dataclasses import asdict, replace

    cfg = _cfg("bench.seeds=[0,1]")
    settings = {arm: bench.settings_digest(cfg, arm) for arm in cfg.bench.arms}
    made = {arm: {"start": START, "settings": settings[arm]} for arm in cfg.bench.arms}
    here = [replace(_cell(a, 0, [1.0, 0.0]), fingerprint=made[a]) for a in cfg.bench.arms]
    away = tmp_path / "elsewhere"
    files = {
        ("il", 1): made["il"],
        ("act_il", 1): {"start": {**START, "warm-up": "d" * 64}, "settings": settings["act_il"]},  # another warm-up
        ("il_il", 1): {"start": START, "settings": settings["il"]},  # the il arm's settings, not il_il's
    }
    for (arm, seed), fingerprint in files.items():
        path = bench.cell_file(away / arm / f"seed_{seed}", "dev")
        path.parent.mkdir(parents=True)
        data = {k: v for k, v in asdict(replace(_cell(arm, seed, [0.0, 1.0]), fingerprint=fingerprint)).items()}
        data.pop("origin")
        path.write_text(json.dumps(data))
    gathered = here + [bench.read_cell_file(f) for f in sorted(away.rglob("cell.dev.json"))]
    cells, refused = bench.admit(gathered, START, settings)
    assert sorted((c.arm, c.seed) for c in cells) == [("act_il", 0), ("il", 0), ("il", 1), ("il_il", 0)]
    assert len(refused) == 2
    assert refused[0].startswith("act_il seed 1 (")
    assert "its warm-up dddddddddddd is not this bench's (aaaaaaaaaaaa)" in refused[0]
    assert refused[1].startswith("il_il seed 1 (") and "its il_il settings" in refused[1]
    # a cell of this folder found again elsewhere, the same result: once; another result: an error naming both
    assert len(bench.admit([*here, here[0]], START, settings)[0]) == 3
    other = replace(here[0], success=[0.0, 0.0], origin="x/cell.dev.json")
    with pytest.raises(BenchError, match="il seed 0 has two different results: this folder and x/cell.dev.json"):
        bench.admit([*here, other], START, settings)
    # where the model lives is no setting (SmolLM2's folder is under each machine's $HOME)
    moved = _cfg("bench.seeds=[0,1]", "model.name_or_path=/elsewhere/tiny-model")
    other_steps = bench.settings_digest(_cfg("train.il.max_steps=3"), "il")
    assert bench.settings_digest(moved, "il") == settings["il"] != other_steps
    # a folder never prepared takes the start most cells share
    assert bench.admit(gathered, {}, settings)[1] == refused
    bad = away / "il" / "seed_1" / "cell.dev.json"
    bad.write_text(json.dumps({"arm": "il"}))
    with pytest.raises(BenchError, match="not a cell file: fields missing"):
        bench.read_cell_file(bad)


def test_the_bench_never_trains_on_the_fold_it_scores_nor_on_the_test_fold():
    bench.check_folds(_cfg())
    for override, words in [
        ("pipeline.experts.split=dev", "pipeline.experts.split is 'dev'"),
        ("pipeline.experts.split=test", "pipeline.experts.split is 'test'"),
        ("pipeline.heldout.split=test", "pipeline.heldout.split is 'test'"),
    ]:
        with pytest.raises(BenchError, match=words):
            bench.check_folds(_cfg(override))
    with pytest.raises(BenchError, match="bench.split=test"):
        bench.check_folds(_cfg("bench.split=test", "pipeline.experts.split=test"))


def test_the_test_fold_is_scored_with_one_set_of_settings_per_folder(tmp_path):
    bench.guard_test_fold(_cfg(), tmp_path)  # dev: nothing recorded
    assert not (tmp_path / bench.TEST_SETTINGS).exists()
    bench.guard_test_fold(_cfg("bench.split=test"), tmp_path)
    bench.guard_test_fold(_cfg("bench.split=test", "run_dir=elsewhere"), tmp_path)  # the same settings: resumed
    with pytest.raises(BenchError, match=r"train.act.max_steps: 2 -> 3.*new run_dir"):
        bench.guard_test_fold(_cfg("bench.split=test", "train.act.max_steps=3"), tmp_path)


def test_the_matched_compute_arm_runs_il_for_the_steps_act_used():
    from nemo_act.stage_data import stage_config

    cfg = load_config("conf/pipeline/il_il.yaml", ["train=demo"])
    assert cfg.pipeline.stages == ["il_matched", "il"]
    matched = stage_config("il_matched", cfg)
    assert (matched.max_steps, matched.epochs) == (cfg.train.act.max_steps, cfg.train.act.epochs)
    assert cfg.train.act.max_steps != cfg.train.il.max_steps  # the demo's budgets differ: the test can fail
    assert matched.learning_rate == cfg.train.il.learning_rate and matched.batch_size == cfg.train.il.batch_size


def _twx_env() -> dict[str, str]:
    pytest.importorskip("textworld_express", reason="the textworld-express package is not installed (.[envs])")
    if shutil.which("java") is None:
        pytest.skip("TextWorld-Express needs Java on PATH")
    java = java_options_without_class_archive()
    return {**os.environ, "JAVA_TOOL_OPTIONS": java, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _bench(env: dict[str, str], out: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nemo_act.cli", "bench", "conf/bench/smoke.yaml", "--run-dir", str(out), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.heavy
@pytest.mark.slow
def test_the_smoke_bench_scores_the_test_fold_once_and_a_cell_rerun_repeats_its_numbers(tmp_path):
    env = _twx_env()
    out = tmp_path / "bench"
    done = _bench(env, out, "bench.split=test")
    assert done.returncode == 0, done.stderr[-3000:]
    report = out / "report" / "test"
    result = json.loads((report / "bench.json").read_text())
    assert list(result["arms"]) == ["il", "act_il", "il_il"] and result["split"] == "test"
    assert result["episodes"] == 4 and result["seeds"] == [0]
    assert (report / "bench.png").stat().st_size > 0
    md = (report / "bench.md").read_text()
    assert (
        sum(line.startswith("| ") for line in md.splitlines()) == 4 and "act_il" in md and "stratified-bootstrap" in md
    )  # header + 3 arms
    assert len((report / "bench.csv").read_text().splitlines()) == 4

    # folds (TextWorld-Express 1.1.0's seed ranges): experts and pairs from train and dev seeds, every scored
    # episode a test seed
    cfg = _cfg()
    from nemo_act.data import Pair, Trajectory, read_jsonl

    folds = {"train": range(0, 1000), "dev": range(10000, 11000), "test": range(20000, 21000)}
    experts = list(read_jsonl(out / "data" / "experts.jsonl", Trajectory))
    assert experts and all(t.variation in folds["train"] for t in experts)
    for name, fold in [("pairs.jsonl", "train"), ("heldout_pairs.jsonl", "dev")]:
        seeds = {int(p.state_id.split("/")[-2]) for p in read_jsonl(out / "data" / name, Pair)}
        assert seeds and all(s in folds[fold] for s in seeds), (name, seeds)
    scored = [json.loads(line) for f in out.glob("arms/*/seed_0/eval/test/*/seed_0/episodes.jsonl")
              for line in f.read_text().splitlines()]  # fmt: skip
    assert len(scored) == 12 and all(e["variation"] in folds["test"] for e in scored)
    assert cfg.bench.split == "dev"  # the file: the test fold was asked on the command line

    # other settings in the same folder: refused, nothing scored
    again = _bench(env, out, "bench.split=test", "train.il.max_steps=3")
    assert again.returncode == 2 and "train.il.max_steps: 2 -> 3" in again.stderr

    # one cell trained and scored again from nothing in another folder (its own warm-up, the same settings): the
    # same episodes; its cell file, gathered with --cells-from where the cell is gone, gives the same table
    assert result["missing"] == [] and result["refused"] == []
    cell = out / "arms" / "act_il" / "seed_0"
    before = sorted((cell / "eval" / "test").glob("*/seed_0/episodes.jsonl"))[0].read_text()
    other = tmp_path / "elsewhere"
    rerun = _bench(env, other, "bench.split=test", "--arm", "act_il", "--seed", "0")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    moved = other / "arms" / "act_il" / "seed_0"
    assert sorted((moved / "eval" / "test").glob("*/seed_0/episodes.jsonl"))[0].read_text() == before
    assert json.loads((other / "fingerprint.json").read_text()) == json.loads((out / "fingerprint.json").read_text())
    aside = cell.rename(tmp_path / "aside")
    alone = _bench(env, out, "bench.split=test", "--report")
    assert alone.returncode == 2 and "act_il seed 0" in " ".join(alone.stdout.split())  # named missing
    table = _bench(env, out, "bench.split=test", "--report", "--cells-from", str(other / "arms"))
    assert table.returncode == 0, table.stderr[-3000:]
    assert json.loads((report / "bench.json").read_text()) == result
    aside.rename(cell)  # back, for what follows

    # each row records the weights it was scored with; a cell whose weights changed since is left out, saying so
    from nemo_act.data.manifest import file_sha256

    final = out / "arms" / "il" / "seed_0" / "stages" / "01_il" / "model.safetensors"
    assert result["arms"]["il"]["weights"] == {"0": {"model.safetensors": file_sha256(final)}}
    weights = final.read_bytes()
    final.write_bytes(weights[:-1] + bytes([weights[-1] ^ 1]))
    stale = _bench(env, out, "bench.split=test", "--report")
    assert stale.returncode == 2 and "left out il seed 0: its checkpoint's weights are not the ones it was scored" in (
        " ".join(stale.stdout.split())
    ), stale.stdout[-2000:]
    final.write_bytes(weights)
    assert _bench(env, out, "bench.split=test", "--report").returncode == 0


def test_the_gpu_and_cluster_lines_of_the_docs_compose():
    """docs/bench.md's one-line changes from the tiny model: each composes to the model, engine and budgets it says."""
    import re
    import shlex

    text = (Path(__file__).parents[1] / "docs" / "bench.md").read_text()
    block = text[text.index("# one GPU, Qwen3-0.6B") :].split("```")[0]
    lines = [re.sub(r"\s*#.*", "", line) for line in block.replace("\\\n", " ").splitlines()]
    commands = [shlex.split(line) for line in lines if line.strip().startswith("nemo-act bench")]
    assert len(commands) == 2
    for argv in commands:
        overrides = [a for a in argv[3:] if "=" in a and not a.startswith("-")]
        cfg = load_config(argv[2], overrides)
        assert cfg.train.act.max_completion_length == 512 and cfg.train.act.max_steps == -1
        assert cfg.model.tiny is None and cfg.bench.arms == ["il", "act_il", "il_il"]
    assert load_config(commands[1][2], [a for a in commands[1][3:] if "=" in a]).engine.name == "nemo_rl"


RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
README_ARMS = {"il": "IL", "act_il": "ACT -> IL", "il_il": "IL -> IL (ACT's optimizer steps)"}


@pytest.mark.parametrize("split", ["dev", "test"])
def test_the_bench_tables_in_the_docs_are_the_committed_reports(split):
    """README.md and docs/bench.md quote the TextWorld-Express bench: their rows are what ``nemo-act bench`` renders
    from the report it wrote (``report/<split>/bench.json``, committed under docs/results/), so a figure typed by
    hand or left from an older run fails here."""
    result = json.loads((RESULTS / f"bench_textworld_express_{split}.json").read_text())
    assert result["split"] == split and len(result["seeds"]) >= 5 and result["episodes"] >= 200
    doc = (RESULTS.parent / "bench.md").read_text().splitlines()
    rows = bench.table_rows(result)
    for row in rows:
        assert "| " + " | ".join(row) + " |" in doc, row
    if split == "test":
        readme = (RESULTS.parents[1] / "README.md").read_text().splitlines()
        for arm, row in zip(result["arms"], rows, strict=True):
            assert f"| {README_ARMS[arm]} | {row[1]} | {row[3]} | {row[5]} |" in readme, arm


@pytest.mark.parametrize("lever", sorted(p.name for p in RESULTS.glob("bench_textworld_express_lever_*.json")))
def test_the_lever_rows_in_the_docs_are_the_committed_reports(lever):
    """docs/bench.md's lever table quotes each lever's own bench (its IL arm retrained beside it): the IL and arm
    figures, the difference and P(improvement) are what ``nemo-act bench`` renders from the committed report."""
    result = json.loads((RESULTS / lever).read_text())
    assert result["split"] == "dev" and len(result["seeds"]) >= 5 and result["episodes"] >= 200  # never the test fold
    rows = dict(zip(result["arms"], bench.table_rows(result), strict=True))
    base = rows.pop(result["baseline"])
    doc = (RESULTS.parent / "bench.md").read_text()
    for row in rows.values():
        assert f"| {base[1]} | {row[1]} | {row[3]} | {row[4]} |" in doc, (lever, row)
