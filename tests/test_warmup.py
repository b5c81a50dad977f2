"""The shared start of the demo and the bench for a pretrained model (issue 58): no warm-up, or one on other tasks.

A pretrained model may be the initial policy itself (``demo.warmup_steps: 0``), or learn the answer formats on other
tasks' experts than the scored ones (``demo.warmup_experts``), IL rows only (``demo.format_pairs_k: 0``). On real
TextWorld-Express games and the real tiny model; what a user checks is which checkpoint every arm starts from and
what the warm-up trained on.
"""

from __future__ import annotations

import json

import pytest
from conftest import java_options_without_class_archive
from rich.console import Console

from nemo_act.config import load_config
from nemo_act.data import Trajectory, read_jsonl

pytestmark = pytest.mark.heavy  # a JVM per collection (tests/conftest.py says what heavy means)


@pytest.fixture(autouse=True)
def _no_scienceworld_class_archive(monkeypatch):
    """TextWorld-Express JVMs without ScienceWorld's class archive (conftest.java_options_without_class_archive)."""
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", java_options_without_class_archive())


def _cfg(model, run, *extra):
    pytest.importorskip("textworld_express", reason="the textworld-express package is not installed (.[envs])")
    return load_config(overrides=[
        "benchmark=textworld_express", "train=smoke", f"model.name_or_path={model}", "model.tiny=null",
        f"run_dir={run}", "pipeline.experts.tasks=[coin]", "pipeline.heldout.tasks=[coin]", "max_tasks=null", *extra,
    ])  # fmt: skip


def test_no_warm_up_starts_every_arm_from_the_model_itself(tiny_model_dir, tmp_path):
    from nemo_act.run.warmup import warm_up

    cfg = _cfg(tiny_model_dir, tmp_path, "demo.warmup_steps=0")
    warm = warm_up(cfg, tmp_path, tmp_path / "data", Console(quiet=True))
    assert warm.init == str(tiny_model_dir) and not (tmp_path / "warmup" / "stages").exists()
    assert {t.task_id for t in read_jsonl(warm.experts, Trajectory)} == {cfg.benchmark.games[0].task}


def test_a_warm_up_on_other_games_trains_on_their_experts_only(tiny_model_dir, tmp_path):
    from nemo_act.run.warmup import warm_up

    other = "demo.warmup_experts={split: train, tasks: [arithmetic, sorting], max_variations: 2, path: null}"
    cfg = _cfg(tiny_model_dir, tmp_path, other, "demo.format_pairs_k=0", "demo.warmup_steps=2")
    warm = warm_up(cfg, tmp_path, tmp_path / "data", Console(quiet=True))
    stage = json.loads((tmp_path / "warmup" / "stages" / "00_il" / "stage.json").read_text())
    assert warm.init == str(tmp_path / "warmup" / "stages" / "00_il") and stage["complete"]
    assert stage["data"] == str(tmp_path / "data" / "warmup_experts.jsonl")  # no selection rows: no format pairs
    assert not (tmp_path / "data" / "format_pairs.jsonl").exists()
    assert sorted(t.task_id for t in read_jsonl(stage["data"], Trajectory)) == ["arithmetic"] * 2 + ["sorting"] * 2
    assert {t.task_id for t in read_jsonl(warm.experts, Trajectory)} == {cfg.benchmark.games[0].task}
