"""The stage-kind table is the one place that says what a kind is: every consumer follows it."""

import pytest

from nemo_act import stage_data
from nemo_act.config import ConfigError, load_config
from nemo_act.engines.nemo_rl import recipe
from nemo_act.engines.nemo_rl.processors import task_name
from nemo_act.stage_kinds import STAGE_KINDS, data_steps, needs_pairs, stage_config, stage_experiment, stage_kind


@pytest.mark.parametrize("name", list(STAGE_KINDS))
def test_every_kind_has_its_builder_hyperparameters_and_a_cluster_mapping(name):
    spec, cfg = stage_kind(name), load_config(overrides=["engine=nemo_rl", "generation=vllm", "train=cluster"])
    assert callable(getattr(stage_data, spec.rows))
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
