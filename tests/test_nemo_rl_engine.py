"""Cluster engine against NeMo-RL itself: our reward environments registered in NeMo-RL's registries,
created by its ``create_env`` and scored by its rollout's ``calculate_rewards``, under a real local Ray.

NeMo-RL is not on PyPI (release container or a checkout of the tag pinned in
``conf/engine/_nemo_rl_pin.yaml``), so CI skips this file; see README "Cluster engine" for how it
was run here (v0.7.0 source, no-deps, Python 3.13 venv, CPU).
"""

import json

import pytest

nemo_rl = pytest.importorskip(
    "nemo_rl", reason="NeMo-RL is not installed (its container or a checkout of the pinned tag; not on PyPI)"
)

import ray  # noqa: E402
import torch  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from nemo_act import stage_data  # noqa: E402
from nemo_act.data import Pair, read_jsonl  # noqa: E402
from nemo_act.engines.nemo_rl.processors import grpo_datum  # noqa: E402
from nemo_act.generation import RandomGenerator  # noqa: E402
from nemo_act.pairs import collect_pairs  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # isolated cluster
    yield
    ray.shutdown()


def test_registered_selection_env_scores_a_rollout_batch(local_ray, sw_experts, tiny_model_dir, cfg, tmp_path):
    from nemo_rl.distributed.batched_data_dict import BatchedDataDict
    from nemo_rl.environments.utils import create_env
    from nemo_rl.experience.rollouts import calculate_rewards

    from nemo_act.engines.nemo_rl.environments import ENVIRONMENTS, register

    register()
    register()  # idempotent
    env = create_env(
        "act_selection",
        {"values": cfg.rewards.selection.model_dump(), "use_admissible": cfg.benchmark.admissible_reward},
    )
    pairs_file = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, pairs_file, progress=False)
    pairs = list(read_jsonl(pairs_file, Pair))[:4]
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = stage_data.act_rows(pairs, cfg)
    datums = [grpo_datum(r, i, tok, "act_selection", 8192, cfg.model.enable_thinking) for i, r in enumerate(rows)]
    answers = [f"<action>{pairs[0].expert_action}</action>", "<action>x</action>", "oops", "<action>y</action>"]
    answers[3] = f"<action>{pairs[3].alternative_action}</action>"
    for d, a in zip(datums, answers, strict=True):
        d["message_log"].append({"role": "assistant", "content": a, "token_ids": torch.tensor([1])})
    batch = BatchedDataDict(
        {
            "message_log": [d["message_log"] for d in datums],
            "extra_env_info": [d["extra_env_info"] for d in datums],
            "task_name": [d["task_name"] for d in datums],
        }
    )
    out = calculate_rewards(batch, {"act_selection": env})
    sel = cfg.rewards.selection
    assert out.rewards.shape == (4, 3)
    assert out.rewards[0].tolist() == [sel.correct, 0.0, 0.0]
    assert out.rewards[2].tolist() == [0.0, 0.0, sel.malformed]
    assert out.rewards[3, 0].item() == 0.0
    assert set(ENVIRONMENTS) == {"act_selection", "act_action"}


KINDS = ("act", "act_noreason", "rl", "il", "sft_choice", "dpo")


def test_every_recipe_and_stage_validates_against_the_pinned_master_config(tmp_path):
    """Base = the installed release's examples/configs; the merged config must pass its own MasterConfig."""
    from nemo_rl.algorithms import dpo, grpo, sft

    from nemo_act.config import conf_root, load_config
    from nemo_act.engines.nemo_rl import driver, recipe

    master_configs = {"grpo": grpo.MasterConfig, "sft": sft.MasterConfig, "dpo": dpo.MasterConfig}
    recipes = sorted((conf_root() / "recipes").glob("*/act-*.yaml"))
    assert len(recipes) == 18
    for path in recipes:
        cfg = load_config(path)
        for kind in KINDS:
            m = driver.build(kind, cfg, cfg.model.name_or_path, tmp_path / kind, 5000)
            master_configs[recipe.ALGORITHM[kind]](**m)  # pydantic: missing keys and wrong types raise
            assert (
                m["policy"]["megatron_cfg"]["tensor_model_parallel_size"] == cfg.engine.nemo_rl.megatron.tensor_parallel
            )
            assert m["cluster"]["num_nodes"] == cfg.engine.nemo_rl.cluster.num_nodes
    act = driver.build("act", cfg, "x", tmp_path, 5000)
    assert "normalize_rewards" in act["grpo"] and "sequence_packing" in act["policy"]  # kept from the base
    bad = dict(act, grpo=dict(act["grpo"], num_prompts_per_step="many"))
    with pytest.raises(Exception, match="num_prompts_per_step"):
        grpo.MasterConfig(**bad)


def test_datums_go_through_nemo_rl_collate_and_train_only_on_the_answer(sw_experts, tiny_model_dir, cfg, tmp_path):
    from functools import partial

    from nemo_rl.data.collate_fn import preference_collate_fn, rl_collate_fn
    from nemo_rl.data.llm_message_utils import add_loss_mask_to_message_log, batched_message_log_to_flat_message

    from nemo_act.data import Trajectory
    from nemo_act.engines.nemo_rl.processors import stage_datums

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    pairs_file = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, pairs_file, progress=False)
    pairs = list(read_jsonl(pairs_file, Pair))[:4]
    grpo = stage_datums("act", stage_data.act_rows(pairs, cfg), tok, "act_selection", 8192, cfg.model.enable_thinking)
    batch = rl_collate_fn(grpo)
    assert batch["task_name"] == ["act_selection"] * 4 and batch["length"].tolist() == [d["length"] for d in grpo]
    assert batch["extra_env_info"][0]["candidates"] == pairs[0].candidates
    il = stage_data.il_rows(list(read_jsonl(sw_experts, Trajectory)), cfg)[:3]
    sft = stage_datums("il", il, tok, None, 8192, cfg.model.enable_thinking)
    logs = rl_collate_fn(sft)["message_log"]
    add_loss_mask_to_message_log(logs, roles_to_train_on=["assistant"])
    flat, _lengths = batched_message_log_to_flat_message(logs, pad_value_dict={"token_ids": tok.pad_token_id})
    answer_tokens = [len(d["message_log"][1]["token_ids"]) for d in sft]
    assert flat["token_loss_mask"].sum(dim=1).tolist() == answer_tokens  # loss on the expert action (+ eos) only
    dpo = stage_datums("dpo", stage_data.dpo_rows(pairs, cfg), tok, None, 8192, cfg.model.enable_thinking)
    pref = partial(preference_collate_fn, tokenizer=tok, make_sequence_length_divisible_by=1, add_loss_mask=True)(dpo)
    assert pref["input_ids"].shape[0] == 2 * len(dpo)  # chosen and rejected interleaved


def test_driver_runs_a_grpo_stage_with_the_gpu_part_standing_in(
    local_ray, sw_experts, tiny_model_dir, monkeypatch, tmp_path
):
    """The driver end to end on CPU: real config build from the release's base, real datums, real reward
    environment created through NeMo-RL's registry and scored by its ``calculate_rewards``, real NeMo-RL
    Logger (TensorBoard). Stand-ins (this machine has no GPU): NeMo-RL's ``grpo.setup`` and ``grpo_train``,
    which place Megatron and vLLM workers on GPUs; they check that the driver calls them as the pinned
    release's signatures take, then score one batch and log one step. ``init_ray`` is replaced by the test's
    isolated local cluster (the real one joins any Ray cluster already running on the machine)."""
    import inspect

    import nemo_rl.algorithms.grpo as nemo_grpo
    import nemo_rl.distributed.virtual_cluster as vc
    from nemo_rl.data.collate_fn import rl_collate_fn
    from nemo_rl.experience.rollouts import calculate_rewards
    from nemo_rl.utils.logger import Logger
    from torchdata.stateful_dataloader import StatefulDataLoader

    from nemo_act.config import load_config, to_yaml
    from nemo_act.engines.nemo_rl import driver

    real_setup, real_train = nemo_grpo.setup, nemo_grpo.grpo_train
    seen = {}

    def setup(master_config, tokenizer, dataset, val_dataset, *rest):
        inspect.signature(real_setup).bind(master_config, tokenizer, dataset, val_dataset, *rest)
        seen["config"] = master_config
        loader = StatefulDataLoader(
            dataset, batch_size=master_config.grpo["num_prompts_per_step"], collate_fn=rl_collate_fn
        )
        logger = Logger(dict(master_config.logger, monitor_gpus=False))
        return (None, None, None, None, loader, None, None, logger, None, None, master_config, {}, {})

    def grpo_train(*args):
        inspect.signature(real_train).bind(*args)
        loader, task_to_env, logger = args[2], args[6], args[8]
        batch = next(iter(loader))
        for log, info in zip(batch["message_log"], batch["extra_env_info"], strict=True):
            expert = info["candidates"][info["expert_index"]]
            log.append({"role": "assistant", "content": f"<action>{expert}</action>", "token_ids": torch.tensor([1])})
        rewards = calculate_rewards(batch, task_to_env).rewards
        logger.log_metrics({"loss": 0.5, "reward": rewards.sum(dim=1).mean().item()}, step=1, prefix="train")
        seen["rewards"] = rewards

    monkeypatch.setattr(nemo_grpo, "setup", setup)
    monkeypatch.setattr(nemo_grpo, "grpo_train", grpo_train)
    monkeypatch.setattr(vc, "init_ray", lambda *a, **k: None)  # the module-scoped isolated cluster is up
    cfg = load_config(
        overrides=["engine=nemo_rl", "train.act.batch_size=4", "train.act.num_generations=2", "train.act.grad_accum=1"]
    )
    exp = tmp_path / "experiment.yaml"
    exp.write_text(to_yaml(cfg))
    pairs_file = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, pairs_file, progress=False)
    out = tmp_path / "01_act"
    driver.main(
        [
            "--stage",
            "act",
            "--config",
            str(exp),
            "--init",
            str(tiny_model_dir),
            "--data",
            str(pairs_file),
            "--out",
            str(out),
        ]
    )
    assert seen["config"].grpo["num_prompts_per_step"] == 2 and seen["config"].grpo["num_generations_per_prompt"] == 2
    assert seen["rewards"].shape == (2, 3) and seen["rewards"][:, 0].tolist() == [cfg.rewards.selection.correct] * 2
    assert "num_generations_per_prompt: 2" in (out / "nemo_rl" / "config.yaml").read_text()
    (line,) = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert line["step"] == 1 and line["loss"] == 0.5 and line["train/loss"] == 0.5
    assert line["rewards/selection_accuracy/mean"] == 1.0 and line["rewards/named_neither/mean"] == 0.0
