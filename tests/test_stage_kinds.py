"""The stage-kind table is the one place that says what a kind is: every consumer follows it."""

import json
from pathlib import Path

import pytest

from nemo_act import stage_data
from nemo_act.config import ConfigError, load_config
from nemo_act.engines.nemo_rl import recipe
from nemo_act.engines.nemo_rl.processors import task_name
from nemo_act.stage_kinds import (
    DATA_KINDS,
    STAGE_KINDS,
    data_steps,
    load,
    needs_pairs,
    stage_config,
    stage_experiment,
    stage_kind,
)


@pytest.mark.parametrize("name", list(STAGE_KINDS))
def test_every_kind_has_its_builder_hyperparameters_and_a_cluster_mapping(name):
    spec, cfg = stage_kind(name), load_config(overrides=["engine=nemo_rl", "generation=vllm", "train=cluster"])
    assert callable(load(spec.rows)) and load(spec.rows) is getattr(stage_data, spec.rows.split(":")[1])
    assert stage_config(name, cfg) is getattr(cfg.train, spec.train)
    assert (spec.reward is not None) == (spec.algorithm == "grpo")  # GRPO needs a reward; SFT and DPO none
    m = recipe.master_config(name, cfg, {}, init="/ckpt", out="/runs/x", n_rows=100)
    assert ("grpo" in m) == (spec.algorithm == "grpo") and ("dpo" in m) == (spec.algorithm == "dpo")
    assert task_name(name)  # routes its rows in NeMo-RL
    for key, value in spec.prompt_settings.items():
        assert getattr(stage_experiment(name, cfg).prompt, key) == value


def test_the_schema_reads_the_table():
    with pytest.raises(ConfigError, match=r"unknown stage 'actt'; stages are: act, act_noreason"):
        load_config(overrides=["pipeline.stages=[actt,il]"])
    assert load_config(overrides=["pipeline.stages=[dpo,il]"]).pipeline.stages == ["dpo", "il"]


def test_the_runner_derives_its_data_steps_from_the_stages():
    assert needs_pairs(["act", "il", "rl"]) and needs_pairs(["dpo"]) and not needs_pairs(["il", "rl"])
    assert data_steps(["il", "rl"]) == ["experts"]
    assert data_steps(["ee", "rl"]) == data_steps(["ee_wm"]) == ["experts", "early_experience"]
    assert data_steps(["act", "ee"]) == ["experts", "pairs", "early_experience"]
    assert data_steps(["sand", "rl"]) == ["experts", "sand"]


@pytest.mark.parametrize("kind", sorted({k.data for k in STAGE_KINDS.values()}))
def test_every_data_kind_names_how_it_is_built_and_read(kind):
    """A built kind names an importable builder and record type, an audit file and its config block."""
    spec = DATA_KINDS[kind]
    if spec.builder is None:
        assert kind in ("experts", "pairs") and spec.audit is spec.record is spec.config is None
        return
    cfg = load_config()
    assert callable(load(spec.builder)) and spec.audit.endswith(".jsonl")
    assert load(spec.record).model_fields["state_id" if kind != "agent_r" else "trajectory_id"]
    assert getattr(cfg, spec.config) is not None


def test_a_baseline_stage_retrains_when_its_data_settings_change(tmp_path):
    """A row-mixing setting changes no audit file (the same reflections), so it is part of the fingerprint of
    the stages that read that data kind, and of no other stage."""
    from nemo_act.pipeline import stage_fingerprint

    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    cfg = load_config()
    other = load_config(overrides=["early_experience.expert_rows_per_reflection=2.0"])
    assert stage_fingerprint("ee", "random", data, cfg) != stage_fingerprint("ee", "random", data, other)
    assert stage_fingerprint("ee_wm", "random", data, cfg) != stage_fingerprint("ee_wm", "random", data, other)
    assert stage_fingerprint("il", "random", data, cfg) == stage_fingerprint("il", "random", data, other)
    assert stage_fingerprint("sand", "random", data, cfg) == stage_fingerprint("sand", "random", data, other)


def test_a_kill_between_training_and_cleanup_never_retrains_the_stage(tmp_path, monkeypatch):
    """pipeline.run_stage deleted checkpoints/ before it wrote ``complete: true``: a kill between the two lost
    both, and the rerun trained the whole stage again. The engine here is a stand-in that leaves what a
    trained stage leaves (an HF folder and its checkpoints/); the kill is an exception raised the moment the
    runner removes checkpoints/."""
    import shutil as shutil_module

    from nemo_act import pipeline
    from nemo_act.config import load_config

    trained = []

    def engine(kind, init, rows, cfg, out):
        trained.append(kind)
        (Path(out) / "checkpoints" / "checkpoint-4").mkdir(parents=True, exist_ok=True)
        (Path(out) / "config.json").write_text("{}")
        return Path(out)

    data = tmp_path / "rows.jsonl"
    data.write_text("x\n")
    rows = [{"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]}]
    runner = pipeline.PipelineRunner(load_config(), tmp_path / "run")
    monkeypatch.setattr(runner.engine, "train_stage", engine)
    real_rmtree = shutil_module.rmtree

    def killed(path, *args, **kwargs):
        if Path(path).name == "checkpoints":
            marker = json.loads((Path(path).parent / "stage.json").read_text())
            assert marker["complete"], "checkpoints/ went before the stage was marked complete"
            raise KeyboardInterrupt  # the job is killed right here
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(pipeline.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        runner.run_stage(2, "il", "/ckpt/warm", {}, rows=rows, data=data)
    monkeypatch.setattr(pipeline.shutil, "rmtree", real_rmtree)
    out = pipeline.PipelineRunner(load_config(), tmp_path / "run").run_stage(
        2, "il", "/ckpt/warm", {}, rows=rows, data=data
    )
    assert trained == ["il"]  # skipped on the rerun, not retrained
    assert not (Path(out) / "checkpoints").exists()  # the leftover went then
