"""Cluster engine without NeMo-RL: every recipe in conf/recipes loads and maps onto NeMo-RL keys, and the
stage launcher hands files and commands over as the runner expects (dry run: no GPU, no NeMo-RL here).
That the mapped configs validate against the pinned release's own ``MasterConfig`` is checked in
tests/test_nemo_rl_engine.py where NeMo-RL is importable."""

import json
import math
import os
import re
import time
from pathlib import Path

import pytest

from nemo_act import stage_data
from nemo_act.config import conf_root, load_config
from nemo_act.engines import train_stage
from nemo_act.engines.nemo_rl import recipe
from nemo_act.engines.nemo_rl.launch import latest_checkpoint, megatron_weights, run_driver, stage_env, stage_metrics
from nemo_act.engines.nemo_rl.recipe import ROWS
from nemo_act.generation.vllm import request_seed, sampling_params

RECIPES = sorted((conf_root() / "recipes").glob("*/act-*.yaml"))
MODELS = {
    "qwen3-8b": "Qwen/Qwen3-8B", "qwen3-4b": "Qwen/Qwen3-4B", "olmo3-7b": "allenai/Olmo-3-7B-Instruct",
    "qwen3-32b": "Qwen/Qwen3-32B", "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B", "olmo3-32b": "allenai/Olmo-3.1-32B-Instruct",
}  # fmt: skip


def test_there_is_a_bf16_and_an_fp8_recipe_per_model_and_benchmark():
    names = {(p.parent.name, p.stem) for p in RECIPES}
    for bench in ("alfworld", "webshop", "scienceworld"):
        for layout in (
            "qwen3-8b-4n4g",
            "qwen3-4b-2n4g",
            "olmo3-7b-4n4g",
            "qwen3-32b-8n4g",
            "qwen3-30b-a3b-8n4g",
            "olmo3-32b-8n4g",
        ):
            assert (bench, f"act-{layout}-megatron") in names and (bench, f"act-{layout}-megatron-fp8") in names


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recipe_loads_and_names_what_it_runs(path: Path):
    cfg = load_config(path)
    n = cfg.engine.nemo_rl
    assert cfg.engine.name == "nemo_rl" and n is not None and cfg.generation.backend == "vllm"
    assert cfg.benchmark.name == path.parent.name
    model = next(m for key, m in MODELS.items() if f"-{key}-" in path.stem)
    assert cfg.model.name_or_path == model
    nodes, gpus = (int(x) for x in re.search(r"-(\d+)n(\d+)g-", path.stem).groups())
    assert (n.cluster.num_nodes, n.cluster.gpus_per_node) == (nodes, gpus)
    assert n.precision == ("fp8" if path.stem.endswith("fp8") else "bf16")
    world = nodes * gpus
    layout = n.megatron.tensor_parallel * n.megatron.pipeline_parallel * n.megatron.context_parallel
    assert world % layout == 0, "Megatron layout must divide the GPUs"
    assert cfg.pipeline.stages == ["act", "il", "rl"] and cfg.run_dir.endswith(path.stem)
    if "qwen3-4b" in path.stem:
        assert cfg.pipeline.pairs_policy == "Qwen/Qwen3-8B"  # paper: the 4B trains on the 8B's pairs
    for kind in ("act", "act_noreason", "rl", "il", "sft_choice", "dpo"):
        recipe.master_config(kind, cfg, {}, init=cfg.model.name_or_path, out="/runs/x", n_rows=1000)


BASELINE_RECIPES = sorted(p for p in (conf_root() / "recipes").glob("*/*.yaml") if p.stem.split("-")[0] in
                          ("ee", "sand", "agent_r"))  # fmt: skip


def test_every_reflection_baseline_has_a_qwen3_8b_recipe_on_each_env_benchmark():
    names = {(p.parent.name, p.stem) for p in BASELINE_RECIPES}
    for bench in ("alfworld", "scienceworld"):  # WebShop's human sessions name no env episode to replay
        for method in ("ee", "sand", "agent_r"):
            assert (bench, f"{method}-qwen3-8b-4n4g-megatron") in names


@pytest.mark.parametrize("path", BASELINE_RECIPES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_baseline_recipe_is_its_act_recipe_with_the_baseline_pipeline(path: Path):
    """Same model, layout, data and evaluation as the ACT recipe it names; the pipeline is the method's
    ``<method>_rl``; every stage maps onto NeMo-RL keys."""
    cfg = load_config(path)
    act = load_config(path.with_name("act-" + path.stem.split("-", 1)[1] + ".yaml"))
    method = path.stem.split("-")[0]
    assert cfg.pipeline.name == f"{method}_rl" and cfg.run_dir.endswith(path.stem)
    assert cfg.pipeline.stages == load_config(conf_root() / "pipeline" / f"{method}_rl.yaml").pipeline.stages
    for block in ("model", "benchmark", "engine", "generation", "eval", "prompt"):
        assert getattr(cfg, block) == getattr(act, block), block
    assert cfg.pipeline.experts == act.pipeline.experts and cfg.pipeline.eval == act.pipeline.eval
    for kind in cfg.pipeline.stages:
        recipe.master_config(kind, cfg, {}, init=cfg.model.name_or_path, out="/runs/x", n_rows=1000)


def test_the_local_engines_finetune_levers_are_refused_on_the_cluster_engine():
    path = conf_root() / "recipes" / "alfworld" / "act-qwen3-8b-4n4g-megatron.yaml"
    cfg = load_config(path, ["+model.finetune.gradient_checkpointing=true", "+model.finetune.top_layers=null"])
    with pytest.raises(ValueError, match="model.finetune is the local engine's .* set model.finetune=null"):
        recipe.master_config("il", cfg, {}, init="x", out="/o", n_rows=640)


def test_act_stage_maps_our_settings_onto_nemo_rl_keys():
    cfg = load_config(conf_root() / "recipes" / "alfworld" / "act-qwen3-8b-4n4g-megatron.yaml")
    sc = cfg.train.act
    m = recipe.master_config("act", cfg, {}, init="/ckpt/warm", out="/runs/x/stages/01_act", n_rows=1000)
    prompts = sc.batch_size * sc.grad_accum // sc.num_generations
    assert m["grpo"]["num_prompts_per_step"] == prompts == 32
    assert m["grpo"]["num_generations_per_prompt"] == sc.num_generations
    assert m["grpo"]["max_num_steps"] == int(sc.epochs) * (1000 // prompts)  # NeMo-RL drops a partial batch
    assert m["loss_fn"]["reference_policy_kl_penalty"] == sc.beta
    assert m["loss_fn"]["ratio_clip_min"] == m["loss_fn"]["ratio_clip_max"] == sc.epsilon
    assert m["loss_fn"]["token_level_loss"] is False and m["loss_fn"]["use_importance_sampling_correction"] is False
    pol = m["policy"]
    assert pol["model_name"] == pol["tokenizer"]["name"] == "/ckpt/warm"
    assert pol["tokenizer"]["chat_template_kwargs"] == {"enable_thinking": True}
    assert pol["train_global_batch_size"] == sc.batch_size * sc.grad_accum
    mg = pol["megatron_cfg"]
    assert mg["enabled"] and pol["dtensor_cfg"]["enabled"] is False
    assert (mg["tensor_model_parallel_size"], mg["sequence_parallel"], mg["activation_checkpointing"]) == (
        2,
        True,
        True,
    )
    assert mg["optimizer"]["lr"] == sc.learning_rate and mg["fp8_cfg"]["enabled"] is False
    gen = pol["generation"]
    assert gen["stop_strings"] == ["</action>"] and gen["max_new_tokens"] == sc.max_completion_length
    assert (gen["temperature"], gen["top_p"]) == (sc.temperature, sc.top_p)
    env = m["env"]["act_selection"]
    assert env["values"] == cfg.rewards.selection.model_dump() and env["use_admissible"] is True
    assert env["log_path"] == "/runs/x/stages/01_act/reward_parts.jsonl"
    assert m["checkpointing"]["checkpoint_dir"] == "/runs/x/stages/01_act/checkpoints"
    assert m["grpo"]["val_period"] == 0 and m["checkpointing"]["metric_name"] is None


def test_fp8_variant_turns_on_te_fp8_rollouts_and_the_is_correction():
    bf16 = load_config(conf_root() / "recipes" / "scienceworld" / "act-qwen3-8b-4n4g-megatron.yaml")
    fp8 = load_config(conf_root() / "recipes" / "scienceworld" / "act-qwen3-8b-4n4g-megatron-fp8.yaml")
    m = recipe.master_config("act", fp8, {}, init="x", out="/o", n_rows=5000)
    assert m["policy"]["megatron_cfg"]["fp8_cfg"] == {
        "enabled": True,
        "fp8": "e4m3",
        "fp8_recipe": "blockwise",
        "fp8_param": False,
    }
    assert m["policy"]["generation"]["vllm_cfg"]["precision"] == "fp8"
    assert m["loss_fn"]["use_importance_sampling_correction"] is True
    assert bf16.train == fp8.train and bf16.model == fp8.model  # the same experiment, other numerics


def test_webshop_reward_has_no_admissible_term_and_sft_dpo_map_their_own_keys():
    cfg = load_config(conf_root() / "recipes" / "webshop" / "act-qwen3-4b-2n4g-megatron.yaml")
    assert (
        recipe.master_config("rl", cfg, {}, init="x", out="/o", n_rows=5000)["env"]["act_action"]["use_admissible"]
        is False
    )
    il = recipe.master_config("il", cfg, {}, init="x", out="/o", n_rows=640)
    assert "grpo" not in il and il["sft"]["max_num_steps"] == math.ceil(cfg.train.il.epochs * 640 / 64)
    assert il["policy"]["max_total_sequence_length"] == cfg.train.il.max_length
    assert il["policy"]["megatron_cfg"]["scheduler"]["lr_decay_style"] == "cosine"
    dpo = recipe.master_config("dpo", cfg, {}, init="x", out="/o", n_rows=64)
    assert dpo["dpo"]["reference_policy_kl_penalty"] == cfg.train.dpo.beta


def test_overrides_apply_last_and_bad_settings_are_named():
    path = conf_root() / "recipes" / "alfworld" / "act-qwen3-8b-4n4g-megatron.yaml"
    cfg = load_config(
        path, ["engine.nemo_rl.overrides={policy.megatron_cfg.empty_unused_memory_level: 2, grpo.seed: 7}"]
    )
    m = recipe.master_config(
        "act", cfg, {"policy": {"megatron_cfg": {"empty_unused_memory_level": 1}}}, init="x", out="/o", n_rows=5000
    )
    assert m["policy"]["megatron_cfg"]["empty_unused_memory_level"] == 2 and m["grpo"]["seed"] == 7
    # the base's interpolations stay as written, its dataset entries are replaced, a new dotted key is added
    base = {"policy": {"tokenizer": {"name": "${policy.model_name}"}, "dtensor_cfg": {"enabled": True}}}
    base["data"] = {"train": {"dataset_name": "squad", "split": "train"}}
    over = load_config(path, ["engine.nemo_rl.overrides={policy.new_knob.depth: 3}"])
    m = recipe.master_config("act", over, base, init="x", out="/o", n_rows=5000)
    assert m["policy"]["dtensor_cfg"]["enabled"] is False and m["policy"]["new_knob"] == {"depth": 3}
    assert "split" not in m["data"]["train"] and m["data"]["train"]["dataset_name"] != "squad"
    assert m["logger"]["tensorboard_enabled"] and not m["logger"]["wandb_enabled"]
    wandb = recipe.master_config(
        "act", load_config(path, ["train.report_to=[wandb]"]), {}, init="x", out="/o/01_act", n_rows=64
    )
    assert wandb["logger"]["wandb_enabled"] and wandb["logger"]["wandb"]["name"].endswith("/01_act")
    odd = load_config(path, ["train.act.batch_size=100"])
    with pytest.raises(ValueError, match="train.act: batch_size x grad_accum = 100 .* num_generations = 8"):
        recipe.master_config("act", odd, {}, init="x", out="/o", n_rows=5000)
    with pytest.raises(ValueError, match="train.il.lr_scheduler 'polynomial'"):
        recipe.master_config(
            "il", load_config(path, ["train.il.lr_scheduler=polynomial"]), {}, init="x", out="/o", n_rows=5000
        )
    with pytest.raises(ValueError, match="engine.nemo_rl is not set"):
        recipe.master_config("act", load_config(), {}, init="x", out="/o", n_rows=5000)


def test_base_keys_we_do_not_set_survive_the_merge():
    cfg = load_config(conf_root() / "recipes" / "alfworld" / "act-qwen3-8b-4n4g-megatron.yaml")
    base = {
        "grpo": {"normalize_rewards": True, "num_prompts_per_step": 1},
        "policy": {"megatron_cfg": {"peft": {"enabled": False}}},
    }
    m = recipe.master_config("act", cfg, base, init="x", out="/o", n_rows=5000)
    assert m["grpo"]["normalize_rewards"] is True and m["grpo"]["num_prompts_per_step"] == 32
    assert m["policy"]["megatron_cfg"]["peft"] == {"enabled": False}


def test_metrics_merge_nemo_rl_scalars_with_reward_parts(tmp_path: Path):
    log = tmp_path / "reward_parts.jsonl"
    log.write_text(
        json.dumps({"call": 1, "accuracy": 0.25, "admissible": 0.0, "format": -0.1, "selection_accuracy": 0.25,
                    "named_neither": 0.5, "malformed": 0.2, "total": 0.15, "n": 8}) + "\n"
    )  # fmt: skip
    lines = stage_metrics({1: {"train/loss": 0.7, "train/reward": 0.15}, 2: {"train/loss": 0.6}}, log, "act")
    assert [line["step"] for line in lines] == [1, 2]
    assert lines[0]["loss"] == 0.7 and lines[0]["reward"] == 0.15 and lines[0]["train/loss"] == 0.7
    assert lines[0]["rewards/selection_accuracy/mean"] == 0.25 and lines[0]["rewards/named_neither/mean"] == 0.5
    assert "rewards/selection_accuracy/mean" not in lines[1] and lines[1]["stage"] == "act"


def test_latest_checkpoint_skips_unfinished_ones(tmp_path: Path):
    assert latest_checkpoint(tmp_path) is None
    for name in ("step_5", "step_40", "tmp_step_50", "step_9"):
        (tmp_path / name / "policy" / "weights").mkdir(parents=True)
    (tmp_path / "step_40" / "policy" / "weights" / "iter_0000040").mkdir()
    step = latest_checkpoint(tmp_path)
    assert step is not None and step.name == "step_40"
    assert megatron_weights(step).name == "iter_0000040"
    assert megatron_weights(tmp_path / "step_9").name == "weights"


def test_dry_run_stage_hands_over_files_and_prints_driver_and_export(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NEMO_ACT_DRY_RUN", "1")
    cfg = load_config(conf_root() / "recipes" / "alfworld" / "act-qwen3-8b-4n4g-megatron.yaml")
    rows = [{"prompt": [{"role": "user", "content": "hi"}], "candidates": ["a", "b"], "expert_index": 0}]
    out = train_stage("act", "/ckpt/warm", rows, cfg, tmp_path / "01_act")
    printed = capsys.readouterr().out
    assert "-m nemo_act.engines.nemo_rl.driver --stage act --init /ckpt/warm" in printed
    assert "tools/convert/megatron_to_hf.py --megatron-ckpt" in printed and "--hf-ref /ckpt/warm" in printed
    assert load_config(out / "experiment.yaml") == cfg
    tagged = [dict(r, task_name="act_selection", enable_thinking=cfg.model.enable_thinking) for r in rows]
    assert [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()] == tagged


def test_vllm_requests_carry_their_own_seed_and_stop_after_the_action():
    cfg = load_config(overrides=["generation=vllm"])
    assert cfg.generation.vllm is not None and cfg.generation.vllm.tensor_parallel >= 1
    assert request_seed(0, "s/1") == request_seed(0, "s/1") != request_seed(0, "s/2") != request_seed(1, "s/2")
    params = sampling_params(cfg.pairs.sampling, 4, 0, "s/1")
    assert params["n"] == 4 and params["stop"] == ["</action>"] and params["include_stop_str_in_output"]
    assert params["max_tokens"] == cfg.pairs.sampling.max_new_tokens and params["seed"] == request_seed(0, "s/1")


def test_stage_processes_see_our_megatron_bridges():
    """NeMo-RL's Megatron workers inherit the driver's environment: tools/convert must lead PYTHONPATH."""
    env = stage_env({"PYTHONPATH": "/opt/site"})
    first, second, repo, rest = env["PYTHONPATH"].split(os.pathsep)
    assert first.endswith("tools/convert/autoregister") and second.endswith("tools/convert") and rest == "/opt/site"
    assert (Path(first) / "sitecustomize.py").is_file() and (Path(second) / "olmo3_bridge.py").is_file()
    assert (Path(repo) / "nemo_act" / "__init__.py").is_file()  # no pip install at job time
    assert "NRL_MEGATRON_CHECKPOINT_DIR" not in env


# ---- issue 11: what would have trained wrong on the real NeMo-RL v0.7.0 ------------------------------------------
Q8B = conf_root() / "recipes" / "alfworld" / "act-qwen3-8b-4n4g-megatron.yaml"


def test_step_counts_are_what_nemo_rls_loader_runs_and_the_schedule_ends_with_them():
    """v0.7.0 builds its train loaders with drop_last=True (algorithms/grpo.py, sft.py, dpo.py)."""
    cfg = load_config(Q8B)
    m = recipe.master_config("act", cfg, {}, init="x", out="/o", n_rows=1000)  # 32 prompts per step: 31 per epoch
    assert m["grpo"]["max_num_steps"] == 93 and m["grpo"]["max_num_epochs"] == 3
    assert m["policy"]["megatron_cfg"]["scheduler"]["lr_decay_iters"] == 93
    il = recipe.master_config("il", cfg, {}, init="x", out="/o", n_rows=100)  # 64 sequences per step: 1 per epoch
    assert il["sft"]["max_num_steps"] == 3 and il["policy"]["megatron_cfg"]["scheduler"]["lr_decay_iters"] == 3
    bounded = load_config(Q8B, ["train.act.max_steps=200"])
    m = recipe.master_config("act", bounded, {}, init="x", out="/o", n_rows=1000)
    assert m["grpo"]["max_num_steps"] == 200 and m["grpo"]["max_num_epochs"] == 7  # 7 x 31 >= 200: no early stop
    with pytest.raises(
        ValueError, match=r"stage act: 20 training rows, fewer than one optimizer step takes \(32 prompts"
    ):
        recipe.master_config("act", cfg, {}, init="x", out="/o", n_rows=20)
    with pytest.raises(ValueError, match=r"stage dpo: 63 training rows.*\(64 sequences"):
        recipe.master_config("dpo", cfg, {}, init="x", out="/o", n_rows=63)


def test_every_stage_clips_gradients_over_a_base_that_does_not():
    """The SFT base (sft_openmathinstruct2_megatron.yaml) sets clip_grad: 0 and max_grad_norm null."""
    cfg = load_config(Q8B)
    base = {"policy": {"max_grad_norm": None, "megatron_cfg": {"optimizer": {"clip_grad": 0}}}}
    for kind in ("act", "act_noreason", "rl", "il", "sft_choice", "dpo"):
        pol = recipe.master_config(kind, cfg, base, init="x", out="/o", n_rows=5000)["policy"]
        assert pol["max_grad_norm"] == 1.0 and pol["megatron_cfg"]["optimizer"]["clip_grad"] == 1.0, kind
    off = load_config(Q8B, ["train.il.max_grad_norm=0"])
    pol = recipe.master_config("il", off, base, init="x", out="/o", n_rows=5000)["policy"]
    assert pol["max_grad_norm"] is None and pol["megatron_cfg"]["optimizer"]["clip_grad"] == 0


def test_local_engine_clips_and_scales_advantages_like_the_cluster_engine(tmp_path):
    from nemo_act.engines.local import stages

    cfg = load_config()
    assert stages._common_args(cfg.train.il, cfg, tmp_path)["max_grad_norm"] == cfg.train.il.max_grad_norm == 1.0
    assert cfg.train.act.baseline == cfg.train.rl.baseline == "group_mean"
    loo = load_config(overrides=["train.act.baseline=leave_one_out"])
    with pytest.raises(ValueError, match="train.act.baseline=leave_one_out: TRL's GRPOTrainer"):
        stages._trainer("act", None, None, [{"prompt": []}], loo, tmp_path)


def test_grpo_baseline_is_one_config_value_on_nemo_rl():
    """The GRPO base (grpo_math_1B_megatron.yaml) has use_leave_one_out_baseline: true; TRL subtracts the mean."""
    base = {"grpo": {"use_leave_one_out_baseline": True, "adv_estimator": {"use_leave_one_out_baseline": True}}}
    m = recipe.master_config("act", load_config(Q8B), base, init="x", out="/o", n_rows=5000)
    assert m["grpo"]["use_leave_one_out_baseline"] is False and m["grpo"]["normalize_rewards"] is True
    assert m["grpo"]["adv_estimator"]["use_leave_one_out_baseline"] is False
    loo = load_config(Q8B, ["train.rl.baseline=leave_one_out"])
    m = recipe.master_config("rl", loo, base, init="x", out="/o", n_rows=5000)
    assert m["grpo"]["use_leave_one_out_baseline"] is True


@pytest.mark.parametrize(
    "path", [p for p in RECIPES if p.stem.endswith("fp8")], ids=lambda p: p.parent.name + "/" + p.stem
)
def test_fp8_pads_each_sequence_to_128_only_where_nemo_rl_does_not_pack(path):
    """NeMo-RL pads a packed sequence to 128 x TP x 2CP itself (models/megatron/data.py:1142-1160); DPO cannot
    pack (algorithms/dpo.py:151 asserts), so only there must each sequence be padded to 128 x TP x 2CP.

    The bases' packing as the pinned release's files set it: grpo_math_1B_megatron.yaml:70-71 and
    sft_openmathinstruct2_megatron.yaml:35-36 ``sequence_packing.enabled: true``; dpo.yaml:92-93 false.
    """
    cfg = load_config(path)
    mg = cfg.engine.nemo_rl.megatron
    shard = mg.tensor_parallel * (2 * mg.context_parallel if mg.context_parallel > 1 else 1)
    packed = {"policy": {"sequence_packing": {"enabled": True}}}
    for kind in ("act", "il", "rl"):
        pol = recipe.master_config(kind, cfg, packed, init="x", out="/o", n_rows=5000)["policy"]
        assert pol["make_sequence_length_divisible_by"] == shard, kind  # no 128 x: NeMo-RL pads the pack
    dpo = recipe.master_config("dpo", cfg, packed, init="x", out="/o", n_rows=5000)["policy"]
    assert dpo["sequence_packing"] == {"enabled": False} and dpo["dynamic_batching"] == {"enabled": False}
    assert dpo["make_sequence_length_divisible_by"] == 128 * shard
    unpacked = recipe.master_config("il", cfg, {}, init="x", out="/o", n_rows=5000)["policy"]
    assert unpacked["make_sequence_length_divisible_by"] == 128 * shard  # a base that does not pack: we pad


def test_grpo_does_not_dump_every_sample_each_step_unless_asked():
    """v0.7.0 grpo_train writes train_data_step<N>.jsonl unless env.should_log_nemo_gym_responses is set."""
    m = recipe.master_config("act", load_config(Q8B), {}, init="x", out="/o", n_rows=5000)
    assert m["env"]["should_log_nemo_gym_responses"] is True
    on = load_config(Q8B, ["engine.nemo_rl.dump_train_data=true"])
    assert (
        recipe.master_config("act", on, {}, init="x", out="/o", n_rows=5000)["env"]["should_log_nemo_gym_responses"]
        is False
    )


def test_reward_parts_keep_their_step_numbers_after_a_resume(tmp_path):
    from nemo_act.engines.nemo_rl.reward_env import SelectionRewardEnv, resume_reward_log

    cfg = load_config()
    log = tmp_path / "reward_parts.jsonl"
    meta = {"candidates": ["a", "b"], "expert_index": 0, "candidates_admissible": [True, True]}
    batch = [[{"role": "assistant", "content": "<action>a</action>"}]]
    first = SelectionRewardEnv(cfg.rewards.selection, True, log)
    for _ in range(5):
        first.step(batch, [meta])
    resume_reward_log(log, 3)  # the stage's newest checkpoint is step_3: steps 4 and 5 are redone
    again = SelectionRewardEnv(cfg.rewards.selection, True, log, first_step=3)
    again.step(batch, [meta])
    assert [json.loads(x)["call"] for x in log.read_text().splitlines()] == [1, 2, 3, 4]


# The driver process as the launcher sees it when NeMo-RL's loop stopped at the job's save deadline: it left NeMo-RL's
# checkpoint layout (``checkpoints/step_<k>/policy/weights``, ``training_info.json``: nemo_rl/utils/checkpoint.py
# ``CheckpointManager.finalize_checkpoint``) and exited with its code for a stage stopped short (driver.main).
STOPPING_DRIVER = """
import json, sys
from pathlib import Path
out, step, code = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ckpt = out / "checkpoints" / f"step_{step}"
(ckpt / "policy" / "weights").mkdir(parents=True, exist_ok=True)
(ckpt / "training_info.json").write_text(json.dumps({"step": step, "total_steps": step}))
sys.exit(code)
"""
EXPORT = """
import sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "model.safetensors").write_text(sys.argv[sys.argv.index("--megatron-ckpt") + 1])
"""


def test_a_stage_stopped_at_its_save_deadline_is_not_exported(tmp_path, monkeypatch):
    """Issue 56: NeMo-RL's loops return normally after the deadline save (grpo.py:3123-3126, sft.py:646-648,
    dpo.py:786-788 at v0.7.0), and the launcher exported the newest ``step_k`` as the stage's weights, after which
    the runner marked the stage complete and removed its checkpoints. The driver now exits 75 for a stage short of
    its last step; the launcher raises ``StageStopped`` without exporting, and ``nemo-act``'s entry point ends with
    75 and one line (tests/test_local_engine.py). A stage that trained to its end is exported as before."""
    import sys

    from nemo_act.engines import StageStopped
    from nemo_act.engines.nemo_rl import launch

    exports = []
    monkeypatch.setattr(launch, "export_command", lambda w, i, o: exports.append(w) or [sys.executable, "-c", EXPORT,
                        "--megatron-ckpt", str(w), "--out", str(o)])  # fmt: skip
    cfg = load_config(Q8B, ["train.act.max_steps=4"])
    out = tmp_path / "01_act"
    for step, code in ((1, 75), (2, 75)):  # stopped twice at a deadline
        monkeypatch.setattr(launch, "driver_command", lambda k, i, o, s=step, c=code: [
            sys.executable, "-c", STOPPING_DRIVER, str(o), str(s), str(c)])  # fmt: skip
        with pytest.raises(StageStopped, match=rf"stage 01_act \(act\) stopped at its save deadline after step {step}"):
            train_stage("act", "/ckpt/warm", [{"x": 1}], cfg, out)
        assert exports == [] and not (out / "model.safetensors").exists() and not (out / "config.yaml").exists()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_1", "step_2"]  # kept for the resume
    monkeypatch.setattr(launch, "driver_command", lambda k, i, o: [sys.executable, "-c", STOPPING_DRIVER, str(o), "4",
                                                                   "0"])  # fmt: skip
    train_stage("act", "/ckpt/warm", [{"x": 1}], cfg, out)  # resumed to its end: exported from its last step
    assert exports == [out / "checkpoints" / "step_4" / "policy" / "weights"]
    assert (out / "model.safetensors").read_text() == str(exports[0]) and (out / "config.yaml").exists()


def test_each_stage_converts_its_init_into_its_own_folder_afresh_unless_it_resumes(tmp_path, monkeypatch, capsys):
    """NeMo-RL caches its HF -> Megatron conversion keyed by path (models/megatron/setup.py)."""
    from nemo_act.engines.nemo_rl.launch import HF_IMPORT

    monkeypatch.setenv("NEMO_ACT_DRY_RUN", "1")
    cfg = load_config(Q8B)
    out = tmp_path / "01_act"
    stale = out / HF_IMPORT / "model__ckpt_warm" / "iter_0000000"
    stale.mkdir(parents=True)  # a conversion killed by a requeue (or an earlier run's)
    run_driver("act", "/ckpt/warm", [], cfg, out)
    assert not (out / HF_IMPORT).exists()
    stale.mkdir(parents=True)
    (out / "checkpoints" / "step_10").mkdir(parents=True)  # trained past the conversion: keep it
    run_driver("act", "/ckpt/warm", [], cfg, out)
    assert stale.exists()
    assert stage_env(out=out)["NRL_MEGATRON_CHECKPOINT_DIR"] == str(out / HF_IMPORT)


def test_stage_config_names_our_dataset_processor_and_env_and_replaces_the_base_data():
    """NeMo-RL loads data.train by dotted path (load_response_dataset); the base's own datasets must not survive."""
    cfg = load_config(Q8B)
    base = {"data": {"max_input_seq_length": 4096, "train": {"dataset_name": "OpenMathInstruct-2",
            "split_validation_size": 0.05}, "validation": {"dataset_name": "HelpSteer3"},
            "default": {"prompt_file": "examples/prompts/cot.txt", "env_name": "math"}}}  # fmt: skip
    act = recipe.master_config("act", cfg, base, init="x", out="/runs/s/01_act", n_rows=5000)["data"]
    assert act["train"] == {
        "dataset_name": "nemo_act.engines.nemo_rl.datasets.StageRowsDataset",
        "data_path": "/runs/s/01_act/rows.jsonl",
        "processor": "nemo_act",
        "env_name": "act_selection",
    }
    # no ``default`` at all: NeMo-RL's setup_preference_data merges it whenever the key exists (None crashed DPO)
    assert act["validation"] is None and "default" not in act and act["max_input_seq_length"] == 4096
    il = recipe.master_config("il", cfg, base, init="x", out="/o", n_rows=5000)["data"]["train"]
    assert il["processor"] == "nemo_act" and "env_name" not in il
    dpo = recipe.master_config("dpo", cfg, base, init="x", out="/o", n_rows=5000)["data"]
    assert "processor" not in dpo["train"]  # NeMo-RL's own preference_preprocessor
    assert (
        "default" not in dpo
        and "default" not in recipe.master_config("dpo", cfg, {}, init="x", out="/o", n_rows=5000)["data"]
    )


def test_moe_recipe_maps_expert_parallel_and_its_vllm_backend_onto_rollouts_only():
    """As NeMo-RL's grpo-qwen3-30ba3b-8n4g-megatron.yaml: EP=2, allgather dispatcher, vLLM's triton MoE backend."""
    cfg = load_config(conf_root() / "recipes" / "scienceworld" / "act-qwen3-30b-a3b-8n4g-megatron.yaml")
    act = recipe.master_config("act", cfg, {}, init="x", out="/o", n_rows=5000)
    mg = act["policy"]["megatron_cfg"]
    assert (mg["tensor_model_parallel_size"], mg["pipeline_model_parallel_size"], mg["expert_model_parallel_size"]) == (
        2, 2, 2,
    )  # fmt: skip
    assert mg["moe_token_dispatcher_type"] == "allgather"
    assert act["policy"]["generation"]["vllm_kwargs"] == {"moe_backend": "triton"}
    il = recipe.master_config("il", cfg, {}, init="x", out="/o", n_rows=5000)
    assert "generation" not in il["policy"]  # SFT has no rollouts: nothing to hang vLLM arguments on


def test_the_save_deadline_comes_from_the_jobs_end_so_a_requeue_loses_no_steps(monkeypatch):
    """NeMo-RL saves once the next step would pass checkpoint_must_save_by (utils/timer.py TimeoutChecker,
    grpo.py:2880); None turned that off while the job requeues itself 600 s before its end (USR1@600)."""
    cfg = load_config(Q8B)
    margin = cfg.engine.nemo_rl.save_deadline_margin_s
    assert margin >= 600  # the .sub files' USR1 requeue margin, plus the save itself
    monkeypatch.delenv(recipe.JOB_END_ENV, raising=False)
    assert recipe.must_save_by(margin) is None  # outside a Slurm job: no deadline
    now = 1_000_000.0
    monkeypatch.setenv(recipe.JOB_END_ENV, str(int(now) + 2 * 86400 + 3 * 3600 + 4 * 60 + 5 + margin))
    assert recipe.must_save_by(margin, now=now) == "02:03:04:05"
    monkeypatch.setenv(recipe.JOB_END_ENV, str(int(now) + 60))
    assert recipe.must_save_by(margin, now=now) == "00:00:00:00"  # too little left: save after the next step
    monkeypatch.setenv(recipe.JOB_END_ENV, str(time.time() + 7200))
    ckpt = recipe.master_config("act", cfg, {}, init="x", out="/o", n_rows=5000)["checkpointing"]
    hours, minutes = int(ckpt["checkpoint_must_save_by"][3:5]), int(ckpt["checkpoint_must_save_by"][6:8])
    assert 0 < 7200 - margin - (hours * 3600 + minutes * 60) < 120


@pytest.mark.heavy
def test_max_samples_cuts_the_stage_rows_every_engine_is_given(sw_experts, tmp_path, monkeypatch):
    """train.<kind>.max_samples shrank NeMo-RL's step count but every row was still written (launch.py); now the
    rows are fitted and capped once, by ``stage_data.rows_for``, and each engine trains what it is given."""
    monkeypatch.setenv("NEMO_ACT_DRY_RUN", "1")
    every = stage_data.rows_for("il", sw_experts, load_config(Q8B))
    cfg = load_config(Q8B, ["train.il.max_samples=5"])
    rows = stage_data.rows_for("il", sw_experts, cfg)
    assert len(every) > 5 and rows == every[:5]
    out = run_driver("il", "/ckpt/warm", rows, cfg, tmp_path / "02_il")
    written = (out / "rows.jsonl").read_text().splitlines()
    last = {k: v for k, v in json.loads(written[-1]).items() if k not in ("task_name", "enable_thinking")}
    assert len(written) == 5 and last == rows[-1]


@pytest.mark.parametrize("kind", ["act", "il", "dpo"])
def test_a_stage_resumed_after_its_last_checkpoint_starts_no_training(tmp_path, kind):
    """Issue 45 on the cluster engine: a stage killed after its final checkpoint (``step_<max_num_steps>``) and
    before the export is handed over from that checkpoint; the driver does not start NeMo-RL's loop again. Earlier
    checkpoints resume as NeMo-RL resumes them (docs/cluster.md "What a resumed stage restores"); a checkpoint past
    the last step is refused, before the loop and after it, so none is ever exported."""
    from nemo_act.engines.nemo_rl.driver import trained_to_the_end

    cfg = load_config(Q8B, [f"train.{kind}.max_steps=7"])
    algorithm = {"act": "grpo", "il": "sft", "dpo": "dpo"}[kind]
    master = recipe.master_config(kind, cfg, {}, init="x", out=str(tmp_path), n_rows=5000)
    assert master[algorithm]["max_num_steps"] == 7
    ckpts = tmp_path / "checkpoints"
    assert trained_to_the_end(master, algorithm, ckpts) is None  # a fresh stage
    (ckpts / "step_5").mkdir(parents=True)
    (ckpts / "tmp_step_7").mkdir()  # a final save cut short: not a checkpoint
    assert trained_to_the_end(master, algorithm, ckpts) is None
    (ckpts / "step_7").mkdir()
    assert trained_to_the_end(master, algorithm, ckpts) == 7
    (ckpts / "step_8").mkdir()  # a resume that trained past the end (or another stage's folder): never exported
    with pytest.raises(RuntimeError, match=rf"step_8 is past the stage's last step \({algorithm}.max_num_steps 7\)"):
        trained_to_the_end(master, algorithm, ckpts)


@pytest.fixture(scope="module")
def every_kind(sw_experts, tmp_path_factory):
    """Each registered stage kind's rows, its data built as the pipeline builds it (tests/every_kind.py)."""
    from every_kind import every_kind_rows

    return every_kind_rows(tmp_path_factory.mktemp("kinds"), sw_experts)


@pytest.mark.heavy
def test_the_cluster_engine_prepares_every_registered_stage_kind(every_kind, tmp_path, monkeypatch):
    """Issue 56: the twin lane's fixture named the data of each kind by hand, and the kind added with the bench's
    on-policy lever (``act_onpolicy``, data ``policy_pairs``) broke every NeMo-RL test there, unseen, since CI has no
    NeMo-RL. Here, in ``make test``: every kind the registry holds, its data built by its own builder, is prepared
    by the cluster engine's dry run (the launcher's files: ``experiment.yaml`` and the tagged ``rows.jsonl``; the
    commands of the driver and the export) and mapped onto NeMo-RL's config (``recipe.master_config``, which the
    driver resolves over the release's base), so a kind the cluster engine cannot prepare fails in CI."""
    from nemo_act.stage_data import stage_experiment
    from nemo_act.stage_kinds import STAGE_KINDS, stage_kind

    monkeypatch.setenv("NEMO_ACT_DRY_RUN", "1")
    assert sorted(every_kind) == sorted(STAGE_KINDS)
    for kind, rows_file in every_kind.items():
        spec = stage_kind(kind)
        size = 8 if spec.algorithm == "grpo" else 2  # a handful of rows make one step (GRPO: 1 prompt x G=8)
        cfg = load_config(Q8B, [f"train.{spec.train}.batch_size={size}", f"train.{spec.train}.grad_accum=1"])
        rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
        out = train_stage(kind, "/ckpt/warm", rows, cfg, tmp_path / f"01_{kind}")
        assert len((out / "rows.jsonl").read_text().splitlines()) == len(rows), kind
        assert load_config(out / "experiment.yaml").engine.name == "nemo_rl"
        algorithm = spec.algorithm
        master = recipe.master_config(kind, stage_experiment(kind, cfg), {}, init="/ckpt/warm", out=str(out),
                                      n_rows=len(rows))  # fmt: skip
        assert master[algorithm]["max_num_steps"] >= 1 and master["data"]["train"]["data_path"] == str(out / ROWS)
        if algorithm == "grpo":  # a reward environment by name, configured
            assert master["data"]["train"]["env_name"] in master["env"], kind
