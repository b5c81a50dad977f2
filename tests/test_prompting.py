"""Prompting baselines (`prompt_cot`, `prompt_nocot`): nothing trained, the initial policy evaluated through the
same evaluation with and without the reasoning instruction; and every shipped pipeline loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nemo_act.config import conf_root, load_config
from nemo_act.data.io import read_jsonl
from nemo_act.evaluation.rollout import EpisodeRecord
from nemo_act.prompts.render import template
from nemo_act.run.plan import plan
from nemo_act.stage_data import expand
from nemo_act.stage_kinds import data_steps

PIPELINES = sorted((conf_root() / "pipeline").glob("*.yaml"))


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.stem)
def test_every_pipeline_loads_and_is_named_after_its_file(path: Path):
    cfg = load_config(path)
    assert cfg.pipeline.name == path.stem
    stages = expand(cfg.pipeline.stages, cfg)
    assert data_steps(stages)[0] == "experts" and (stages or path.stem.startswith("prompt_"))


def test_the_two_prompting_baselines_differ_only_in_the_reasoning_instruction():
    cot, nocot = (load_config(conf_root() / "pipeline" / f"prompt_{k}.yaml") for k in ("cot", "nocot"))
    assert cot.pipeline.stages == nocot.pipeline.stages == []
    assert cot.prompt.cot and not nocot.prompt.cot
    assert cot.prompt.model_copy(update={"cot": False}) == nocot.prompt
    assert cot.model_copy(update={"prompt": nocot.prompt, "pipeline": nocot.pipeline}) == nocot


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cot", "nocot"])
def test_a_prompting_baseline_evaluates_the_initial_policy_and_trains_nothing(scienceworld, kind, tmp_path):
    """`nemo-act run conf/pipeline/prompt_<kind>.yaml`: no expert collection, no stage; the initial policy
    (here the random one) is evaluated as `init` in the real env, with the reasoning instruction in every
    prompt for `cot` and in none for `nocot`; the plan lists only that evaluation."""
    from nemo_act.run.pipeline import PipelineRunner

    cfg = load_config(
        conf_root() / "pipeline" / f"prompt_{kind}.yaml",
        ["pipeline.init=random", "pipeline.eval.tasks=[lifespan-longest-lived]", "pipeline.eval.max_variations=1",
         "pipeline.eval.workers=1", "eval.seeds=[0]", f"run_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    runner = PipelineRunner(cfg)
    assert [r["step"] for r in plan(runner)] == ["evaluate"]
    log = runner.run()
    assert list(log["eval"]) == ["init"] and log["final_checkpoint"] == "random"
    assert not (runner.dir / "stages").exists() and not runner.data_dir.exists()
    run = json.loads((runner.dir / "run.json").read_text())
    assert run["pipeline"] == f"prompt_{kind}" and run["eval"]["init"]["episodes"] == 1
    prompts = [s["prompt"] for e in read_jsonl(runner.dir / "eval" / "init" / "seed_0" / "episodes.jsonl",
                                               EpisodeRecord) for s in e.steps]  # fmt: skip
    instruction = template("action_instruction_cot").strip()
    assert prompts and all((instruction in p) == (kind == "cot") for p in prompts)
    # a finished evaluation with the same checkpoint and settings is reused; other settings evaluate again
    episodes = runner.dir / "eval" / "init" / "seed_0" / "episodes.jsonl"
    stamp = episodes.stat().st_mtime_ns
    assert PipelineRunner(cfg).run()["eval"]["init"]["fingerprint"] == run["eval"]["init"]["fingerprint"]
    assert episodes.stat().st_mtime_ns == stamp
    longer = cfg.model_copy(update={"prompt": cfg.prompt.model_copy(update={"history_k": 1})})
    assert PipelineRunner(longer).run()["eval"]["init"]["fingerprint"] != run["eval"]["init"]["fingerprint"]
    assert episodes.stat().st_mtime_ns != stamp


def test_the_demo_runs_a_pipeline_with_the_files_own_settings_on_the_demos():
    """`demo.pipelines=[..., prompt_nocot]` evaluates without the reasoning instruction: the pipeline file's
    settings apply on top of conf/demo.yaml (which a bare stage list would lose); others keep the demo's."""
    from nemo_act.run.demo import _pipeline_cfg

    demo = load_config(conf_root() / "demo.yaml")
    nocot = _pipeline_cfg(demo, "prompt_nocot", "runs/warm")
    assert nocot.pipeline.stages == [] and not nocot.prompt.cot and nocot.pipeline.init == "runs/warm"
    assert nocot.prompt.history_k == demo.prompt.history_k == 1 and nocot.pipeline.eval == demo.pipeline.eval
    act = _pipeline_cfg(demo, "act_il_rl", "runs/warm")
    update = {"name": "act_il_rl", "stages": ["act", "il", "rl"], "init": "runs/warm"}
    expected = demo.pipeline.model_copy(update=update)
    assert act == demo.model_copy(update={"pipeline": expected})
    assert _pipeline_cfg(demo, "act3_il_rl", "runs/warm").pairs.candidates == 3
