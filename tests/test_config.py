import sys
from pathlib import Path

import pytest
import yaml

from nemo_act import stage_kinds
from nemo_act.config import ConfigError, compose, conf_root, group_options, load_config, to_yaml


def test_default_config_composes_every_group():
    cfg = load_config()
    assert cfg.model.tiny is not None and cfg.model.tiny.head_dim >= 32
    assert cfg.benchmark.name == "scienceworld" and cfg.benchmark.max_steps == 50
    assert cfg.engine.model_dump() == {"name": "local"}  # the local engine's block is its name: no cluster fields
    assert (cfg.rewards.selection.correct, cfg.rewards.selection.admissible, cfg.rewards.selection.malformed) == (
        1.0,
        0.1,
        -0.5,
    )
    assert (cfg.eval.sampling.temperature, cfg.eval.sampling.top_p) == (0.6, 0.95)


@pytest.mark.parametrize("group", ["model", "benchmark", "generation", "engine"])
def test_every_option_of_every_group_validates(group):
    options = group_options(group)
    assert options, f"group {group} has no options"
    for option in options:
        load_config(overrides=[f"{group}={option}"])


def test_group_and_dotted_overrides():
    cfg = load_config(overrides=["model=qwen3_8b", "benchmark=webshop", "pairs.k=4", "prompt.cot=false"])
    assert cfg.model.name_or_path == "Qwen/Qwen3-8B" and cfg.model.tiny is None
    assert cfg.benchmark.name == "webshop" and cfg.benchmark.admissible_reward is False
    assert cfg.pairs.k == 4 and cfg.prompt.cot is False


def test_nemo_rl_pin_is_in_one_file():
    pins = [p for p in conf_root().rglob("*.yaml") if "nemo_rl_release:" in p.read_text()]
    assert [p.name for p in pins] == ["_nemo_rl_pin.yaml"]
    pin = yaml.safe_load(pins[0].read_text())
    assert load_config(overrides=["engine=nemo_rl"]).engine.nemo_rl_release == pin["nemo_rl_release"]


def test_unknown_key_is_named_with_a_suggestion():
    with pytest.raises(ConfigError) as err:
        load_config(overrides=["pairs.kk=3"])
    msg = str(err.value)
    assert "config.yaml" in msg and "field 'pairs.kk'" in msg and "did you mean 'pairs.k'" in msg


@pytest.mark.parametrize(
    ("benchmark", "typo", "key"),
    [
        ("scienceworld", "simplificaton", "simplification"),
        ("traces", "pathh", "path"),
        ("webshop", "catalogue", "catalog"),
    ],
)
def test_unknown_benchmark_key_is_matched_against_its_adapter_config(benchmark, typo, key):
    """Keys that only one benchmark has (its adapter's CONFIG class) get a suggestion too."""
    with pytest.raises(ConfigError, match=rf"field 'benchmark.{typo}': unknown key \(did you mean 'benchmark.{key}'"):
        load_config(overrides=[f"benchmark={benchmark}", f"benchmark.{typo}=1"])


def test_mistyped_value_is_named():
    with pytest.raises(ConfigError, match=r"field 'benchmark.max_steps'.*integer.*'fifty'"):
        load_config(overrides=["benchmark.max_steps=fifty"])


def test_out_of_range_value_is_named():
    with pytest.raises(ConfigError, match=r"field 'pairs.sampling.top_p'"):
        load_config(overrides=["pairs.sampling.top_p=1.5"])


def test_unknown_group_option_lists_the_options():
    with pytest.raises(ConfigError, match=r"no option 'gpt5' in group 'model'; options are: .*qwen3_8b"):
        load_config(overrides=["model=gpt5"])


def test_override_without_equals_is_rejected():
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(overrides=["pairs.k"])


def test_missing_key_in_a_file_is_named(tmp_path: Path):
    bad = tmp_path / "recipe.yaml"
    bad.write_text(f"defaults:\n  - {conf_root() / 'config.yaml'}\n  - _self_\nrun_dir: x\n")
    assert load_config(bad).run_dir == "x"  # NeMo-RL-style inheritance from a parent file
    bad.write_text("seed: 1\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert str(bad) in str(err.value) and "field 'model': Field required" in str(err.value)


def test_invalid_yaml_names_file_and_line(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nmodel: [unclosed\n")
    with pytest.raises(ConfigError, match=rf"{bad}:\d+: invalid YAML"):
        compose(bad)


def test_to_yaml_round_trips(tmp_path: Path):
    cfg = load_config(overrides=["pairs.k=3"])
    dumped = tmp_path / "resolved.yaml"
    dumped.write_text(to_yaml(cfg))
    assert load_config(dumped) == cfg


def test_group_switch_reaches_a_parent_file():
    cfg = load_config(conf_root() / "pipeline" / "il_rl.yaml", ["model=qwen3_0.6b", "engine=nemo_rl"])
    assert cfg.model.name_or_path == "Qwen/Qwen3-0.6B" and cfg.engine.name == "nemo_rl"
    assert cfg.pipeline.stages == ["il", "rl"]


def test_group_switch_wins_over_a_child_files_own_choice():
    assert load_config(conf_root() / "demo.yaml").model.tiny.hidden_size == 128  # demo picks tiny_demo
    assert load_config(conf_root() / "demo.yaml", ["model=tiny"]).model.tiny.hidden_size == 64


def test_a_files_group_choice_replaces_its_parents(tmp_path: Path):
    """A recipe picking benchmark: alfworld over config.yaml's scienceworld gets ALFWorld's keys only."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"defaults:\n  - {conf_root() / 'config.yaml'}\n  - benchmark: alfworld\n  - _self_\n")
    cfg = load_config(recipe)
    assert cfg.benchmark.name == "alfworld" and not hasattr(cfg.benchmark, "simplification")
    own = tmp_path / "own.yaml"  # the file's own keys still apply over the group it picks
    own.write_text(f"defaults:\n  - {recipe}\n  - benchmark: alfworld\n  - _self_\nbenchmark:\n  max_steps: 7\n")
    assert load_config(own).benchmark.max_steps == 7


# ---- the config search path (NEMO_ACT_CONF), presets, registered train blocks --------------------------------


def test_a_user_folder_holds_only_its_own_files_and_is_searched_first(tmp_path, monkeypatch):
    """NEMO_ACT_CONF adds a benchmark option and a pipeline that inherits the packaged root config by its
    relative ``../config.yaml``; a same-named option extends the packaged one by naming itself."""
    mine = tmp_path / "myconf"
    (mine / "pipeline").mkdir(parents=True)
    (mine / "benchmark").mkdir()
    (mine / "pipeline" / "mine.yaml").write_text("defaults:\n  - ../config.yaml\n  - _self_\npipeline:\n  name: mine\n")
    (mine / "benchmark" / "alfworld.yaml").write_text("defaults:\n  - alfworld.yaml\n  - _self_\nmax_steps: 7\n")
    monkeypatch.setenv("NEMO_ACT_CONF", str(mine))
    monkeypatch.chdir(tmp_path)
    cfg = load_config("pipeline/mine.yaml", ["benchmark=alfworld"])
    assert cfg.pipeline.name == "mine" and cfg.pipeline.stages == ["act", "il", "rl"]  # the packaged root's
    assert cfg.benchmark.name == "alfworld" and cfg.benchmark.max_steps == 7  # extended, not replaced
    assert "alfworld" in group_options("benchmark") and "act_il" in group_options("pipeline")
    # a packaged pipeline by the path the docs give, from a folder that is not the checkout
    assert load_config("conf/pipeline/act_il.yaml").pipeline.name == "act_il"
    with pytest.raises(ConfigError, match=r"pipeline/nope.yaml: config file not found .*myconf"):
        load_config("pipeline/nope.yaml")


def test_the_working_directory_s_config_yaml_is_never_the_default(tmp_path, monkeypatch):
    (tmp_path / "config.yaml").write_text("seed: [not, a, config]\n")
    monkeypatch.chdir(tmp_path)
    assert load_config().seed == 0


def test_train_smoke_bounds_every_stage_and_the_data_steps_and_overrides_still_win():
    cfg = load_config(overrides=["train=smoke", "pipeline.eval.workers=3"])
    for block in ("act", "rl", "il", "sft_choice", "dpo"):
        assert getattr(cfg.train, block).max_steps == 2, block
    assert cfg.eval.seeds == [0] and cfg.eval.sampling.max_new_tokens == 16  # its _global_ block
    assert cfg.pipeline.eval.workers == 3 and cfg.pipeline.eval.max_variations == 1


def test_a_registered_stage_kind_s_own_train_block_is_checked_against_its_algorithm(tmp_path, monkeypatch):
    ext = tmp_path / "ext_stage_for_config_test.py"
    ext.write_text(
        "from nemo_act.stage_kinds import StageKind, register\n"
        "register(StageKind(name='ilx', algorithm='sft', data='experts', rows='nemo_act.kinds.imitation:il_rows',\n"
        "                   prompt='generation', train='ilx'))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(stage_kinds, "STAGE_KINDS", dict(stage_kinds.STAGE_KINDS))  # the registry as it was, after
    monkeypatch.delitem(sys.modules, "ext_stage_for_config_test", raising=False)
    block = "{epochs: 1, max_steps: 2, learning_rate: 0.001, lr_scheduler: constant, warmup_ratio: 0.0, "
    block += "weight_decay: 0.0, max_grad_norm: 1.0, batch_size: 2, grad_accum: 1, max_samples: null, "
    block += "logging_steps: 1, save_steps: 2"
    over = ["extensions=[ext_stage_for_config_test]", "pipeline.stages=[ilx]"]
    cfg = load_config(overrides=[*over, f"train.ilx={block}, max_length: 64}}"])
    assert cfg.train.ilx.max_length == 64 and cfg.pipeline.stages == ["ilx"]
    with pytest.raises(ConfigError, match=r"field 'train.ilx.max_length': Field required"):
        load_config(overrides=[*over, f"train.ilx={block}}}"])
    with pytest.raises(ConfigError, match=r"field 'train.nobody': unknown key"):
        load_config(overrides=[f"train.nobody={block}, max_length: 64}}"])
    with pytest.raises(ConfigError, match=r"field 'train.actt': unknown key \(did you mean 'train.act'\?\)"):
        load_config(overrides=["train.actt.learning_rate=1"])
    with pytest.raises(ConfigError, match=r"train.ilx is missing: stage 'ilx' of pipeline.stages trains with it"):
        load_config(overrides=over)
    with pytest.raises(ConfigError, match=r"field 'extensions': cannot import 'no_such_ext_module'"):
        load_config(overrides=["extensions=[no_such_ext_module]"])


def test_max_tasks_keeps_the_first_tasks_of_every_episode_list(monkeypatch):
    """train=smoke bounds every episode list to its first task (ScienceWorld has 30): the adapter's order is kept."""
    from types import SimpleNamespace

    from nemo_act.evaluation import rollout

    listed = [("b", 0), ("b", 1), ("a", 0), ("c", 0), ("a", 1)]
    monkeypatch.setattr(rollout, "adapter_of", lambda bench: SimpleNamespace(episodes=lambda *args: list(listed)))
    smoke = load_config(overrides=["train=smoke"])
    assert smoke.max_tasks == 1 and rollout.list_episodes(smoke, "train") == [("b", 0), ("b", 1)]
    two = load_config(overrides=["max_tasks=2"])
    assert rollout.list_episodes(two, "train") == [("b", 0), ("b", 1), ("a", 0), ("a", 1)]
    assert rollout.list_episodes(load_config(), "train") == listed  # null: all


def test_a_run_config_written_before_the_newer_keys_still_loads_as_it_ran(tmp_path):
    """A run folder's config.yaml from before extensions, max_tasks and env.lanes existed (report, resume) loads,
    with what that run did: no extensions, every task, one lane."""
    import yaml

    from nemo_act.config.schema import ExperimentConfig

    dump = load_config().model_dump(mode="json")
    del dump["extensions"], dump["max_tasks"], dump["env"]["lanes"]
    old = ExperimentConfig.model_validate(yaml.safe_load(yaml.safe_dump(dump)))
    assert (old.extensions, old.max_tasks, old.env.lanes) == ([], None, 1)
    assert load_config().env.lanes == "auto"
    # before engines were plugins (2026-12-03) every engine block carried the NeMo-RL pin, the local one nemo_rl: null
    pin = yaml.safe_load((conf_root() / "engine" / "_nemo_rl_pin.yaml").read_text())
    dump["engine"] = {"name": "local", **pin, "nemo_rl": None}
    assert ExperimentConfig.model_validate(dump).engine.model_dump() == {"name": "local"}
    cluster = load_config(overrides=["engine=nemo_rl"]).model_dump(mode="json")
    del cluster["engine"]["nemo_rl_commit"]  # and before the commit was pinned
    assert ExperimentConfig.model_validate(cluster).engine.nemo_rl_commit is None
    # before 2026-12-04: ScienceWorld's JVMs ran with HotSpot's defaults, batch invariance was the job's variable
    vllm = load_config(overrides=["generation=vllm"]).model_dump(mode="json")
    del vllm["benchmark"]["jvm_options"], vllm["generation"]["vllm"]["batch_invariant"]
    older = ExperimentConfig.model_validate(vllm)
    assert older.benchmark.jvm_options == [] and older.generation.vllm.batch_invariant is False
    assert load_config().benchmark.jvm_options == ["-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2"]


def test_the_engine_block_is_checked_against_the_engine_s_own_settings():
    with pytest.raises(ConfigError, match=r"field 'engine.nemo_rl': unknown key"):
        load_config(overrides=["+engine.nemo_rl={precision: bf16}"])
    with pytest.raises(ConfigError, match=r"field 'engine.nemo_rl.precision'"):
        load_config(overrides=["engine=nemo_rl", "engine.nemo_rl.precision=fp4"])
    with pytest.raises(ConfigError, match=r"engine.name: cannot import 'no_such_pkg.engine'"):
        load_config(overrides=["engine.name=no_such_pkg.engine"])


@pytest.mark.parametrize("steps", ["-5", "0"])
def test_max_steps_is_minus_one_or_positive(steps):
    """Only -1 means "run the epochs"; another negative number or 0 is refused naming the field."""
    with pytest.raises(ConfigError, match=rf"train.il.max_steps.*{steps}: a positive number of optimizer steps, or -1"):
        load_config(overrides=[f"train.il.max_steps={steps}"])
    assert load_config(overrides=["train.il.max_steps=-1"]).train.il.max_steps == -1
