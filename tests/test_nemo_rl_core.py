"""Cluster engine, the parts that need no NeMo-RL: datum processors with a real tokenizer, and the reward
environments as actors under a real local Ray (an isolated single-CPU cluster started by the test)."""

import json

import pytest
import torch
from transformers import AutoTokenizer

from nemo_act.data import Pair, Trajectory, read_jsonl
from nemo_act.engines.nemo_rl.processors import (
    STOP_STRINGS,
    grpo_datum,
    nemo_act_processor,
    preference_record,
    sft_datum,
    tag_rows,
)
from nemo_act.engines.nemo_rl.reward_env import REWARD_PARTS, ActionRewardEnv, SelectionRewardEnv
from nemo_act.generation import RandomGenerator
from nemo_act.kinds.act import act_rows
from nemo_act.kinds.controls import dpo_rows
from nemo_act.kinds.imitation import il_rows
from nemo_act.prompts.render import apply_chat_template
from nemo_act.steps.pairs import collect_pairs

pytestmark = pytest.mark.heavy  # the whole module: see tests/conftest.py for what heavy means


@pytest.fixture(scope="module")
def pairs(sw_experts, cfg, tmp_path_factory):
    out = tmp_path_factory.mktemp("nemo_rl_pairs") / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, out, progress=False)
    return list(read_jsonl(out, Pair))


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_grpo_datum_holds_the_core_prompt_as_token_ids(pairs, tokenizer, cfg):
    rows = act_rows(pairs, cfg)
    datum = grpo_datum(rows[0], 0, tokenizer, "act_selection", 8192, cfg.model.enable_thinking)
    (turn,) = datum["message_log"]
    expected = apply_chat_template(tokenizer, rows[0]["prompt"], cfg.model.enable_thinking)
    assert turn["content"] == expected and tokenizer.decode(turn["token_ids"]) == expected
    assert "Candidate Actions for the NEXT step" in expected
    assert expected.rsplit("<|im_start|>assistant\n", 1)[1].strip() in ("", "<think>\n\n</think>")  # no answer yet
    assert datum["length"] == len(turn["token_ids"]) and datum["loss_multiplier"] == 1.0
    assert datum["stop_strings"] == STOP_STRINGS
    info = datum["extra_env_info"]
    assert info["candidates"] == pairs[0].candidates and info["expert_index"] == pairs[0].expert_index
    assert "prompt" not in info


def test_a_too_long_prompt_is_cut_and_masked_out(pairs, tokenizer, cfg):
    row = act_rows(pairs, cfg)[0]
    datum = grpo_datum(row, 3, tokenizer, "act_selection", 16, cfg.model.enable_thinking)
    assert datum["length"] == 16 == len(datum["message_log"][0]["token_ids"]) and datum["loss_multiplier"] == 0.0


def test_sft_and_dpo_datums_put_the_answer_in_its_own_assistant_turn(sw_experts, pairs, tokenizer, cfg):
    il = il_rows(list(read_jsonl(sw_experts, Trajectory)), cfg)
    datum = sft_datum(il[0], 0, tokenizer, 8192, cfg.model.enable_thinking)
    user, answer = datum["message_log"]
    assert answer["role"] == "assistant" and answer["content"].startswith("<action>")
    assert answer["token_ids"][-1].item() == tokenizer.eos_token_id
    full = torch.cat([user["token_ids"], answer["token_ids"]])
    assert datum["length"] == len(full) and tokenizer.decode(full).endswith(answer["content"])
    (dpo_row,) = tag_rows("dpo", dpo_rows(pairs[:1], cfg), cfg.model.enable_thinking)
    record = preference_record(dpo_row)
    (best,) = [c for c in record["completions"] if c["rank"] == 0]  # NeMo-RL: lower rank is preferred
    (worse,) = [c for c in record["completions"] if c["rank"] == 1]
    assert pairs[0].expert_action in best["completion"][-1]["content"] and record["context"] == dpo_row["prompt"]
    assert pairs[0].alternative_action in worse["completion"][-1]["content"] and record["task_name"] == "act_dpo"


def test_the_registered_processor_routes_tagged_rows_to_their_datum(sw_experts, pairs, tokenizer, cfg):
    """What NeMo-RL's loader calls for each row of a stage's rows file (PROCESSOR_REGISTRY["nemo_act"])."""
    thinking = cfg.model.enable_thinking
    act = tag_rows("act", act_rows(pairs[:2], cfg), thinking)
    assert {r["task_name"] for r in act} == {"act_selection"} and all("enable_thinking" in r for r in act)
    datum = nemo_act_processor(act[1], None, tokenizer, 8192, 1, add_bos=True)  # run_sft.py binds add_bos etc.
    assert datum == {
        **grpo_datum(act[1], 1, tokenizer, "act_selection", 8192, thinking),
        "message_log": datum["message_log"],
    }
    assert "task_name" not in datum["extra_env_info"] and "enable_thinking" not in datum["extra_env_info"]
    il = tag_rows("il", il_rows(list(read_jsonl(sw_experts, Trajectory)), cfg)[:1], thinking)
    assert nemo_act_processor(il[0], None, tokenizer, 8192, 0)["task_name"] == "act_sft"
    assert tag_rows("rl", [{}], thinking)[0]["task_name"] == "act_action"
    with pytest.raises(ValueError, match="task_name 'act_dpo' is not a GRPO or SFT stage's"):
        nemo_act_processor(tag_rows("dpo", [{}], thinking)[0], None, tokenizer, 8192, 0)


def _log(answer: str) -> list[dict]:
    return [{"role": "user", "content": "prompt"}, {"role": "assistant", "content": answer}]


def test_reward_envs_return_one_column_per_part(pairs, cfg):
    env = SelectionRewardEnv(cfg.rewards.selection, cfg.benchmark.admissible_reward)
    p = pairs[0]
    meta = {k: v for k, v in act_rows([p], cfg)[0].items() if k != "prompt"}
    answers = [
        f"<think>the other one</think><action>{p.expert_action}</action>",
        f"<action>{p.alternative_action}</action>",
        "no tag at all",
    ]
    out = env.step([_log(a) for a in answers], [meta] * 3)
    sel = cfg.rewards.selection
    assert out.rewards.shape == (3, len(REWARD_PARTS)) and out.terminateds.all()
    assert out.rewards[0].tolist() == [sel.correct, 0.0, 0.0]
    assert out.rewards[1].tolist()[0] == 0.0 and out.rewards[2].tolist() == [0.0, 0.0, sel.malformed]
    assert out.answers[:2] == [p.expert_action, p.alternative_action]
    act = ActionRewardEnv(cfg.rewards.action, True)
    res = act.step([_log("<action>look around</action>")], [{"expert_action": "look around", "admissible_actions": []}])
    assert res.rewards.tolist() == [[cfg.rewards.action.correct, 0.0, 0.0]]


def test_reward_env_runs_as_an_actor_under_a_real_local_ray(pairs, cfg):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[cluster]')")
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)  # isolated cluster
    try:
        actor = ray.remote(SelectionRewardEnv).remote(cfg.rewards.selection.model_dump(), True)
        rows = act_rows(pairs[:8], cfg)
        metas = [{k: v for k, v in r.items() if k != "prompt"} for r in rows]
        logs = [_log(f"<action>{p.expert_action}</action>") for p in pairs[:8]]
        out = ray.get(actor.step.remote(logs, metas))
        assert out.rewards[:, 0].mean().item() == cfg.rewards.selection.correct  # selection accuracy 100%
    finally:
        ray.shutdown()


def test_reward_env_logs_every_part_once_per_step(pairs, cfg, tmp_path):
    """NeMo-RL v0.7.0's GRPO logs only the total reward: the env's own log keeps every part per step."""
    log = tmp_path / "stage" / "reward_parts.jsonl"
    env = SelectionRewardEnv(cfg.rewards.selection, cfg.benchmark.admissible_reward, log)
    p = pairs[0]
    meta = {k: v for k, v in act_rows([p], cfg)[0].items() if k != "prompt"}
    answers = [
        f"<action>{p.expert_action}</action>",
        f"<action>{p.alternative_action}</action>",
        "<action>zzz</action>",
        "none",
    ]
    env.step([_log(a) for a in answers], [meta] * 4)
    env.step([_log(answers[0])], [meta])
    first, second = (json.loads(line) for line in log.read_text().splitlines())
    assert (first["call"], first["n"], second["call"], second["n"]) == (1, 4, 2, 1)
    assert first["selection_accuracy"] == 0.25 and first["named_neither"] == 0.25 and first["malformed"] == 0.25
    assert (
        first["accuracy"] == cfg.rewards.selection.correct / 4
        and first["format"] == cfg.rewards.selection.malformed / 4
    )
    assert second["selection_accuracy"] == 1.0
    ActionRewardEnv(cfg.rewards.action, True).step(
        [_log("<action>a</action>")], [{"expert_action": "a", "admissible_actions": []}]
    )


def test_reward_env_warns_when_its_first_steps_give_grpo_no_signal(pairs, cfg, tmp_path, caplog):
    """The cluster engine's counterpart of the local ZeroVarianceWatch: the reward env groups each step's
    responses by their datum (a prompt's G responses share it), logs ``frac_reward_zero_std`` and warns
    once when every group of the first ``zero_variance_steps`` steps scored alike."""
    metas = [{k: v for k, v in act_rows([p], cfg)[0].items() if k != "prompt"} for p in pairs[:2]]
    flat = [_log("none")] * 4  # all malformed: one reward per group
    mixed = [_log(f"<action>{pairs[0].expert_action}</action>"), _log("none"), _log("none"), _log("none")]
    batch_metas = [metas[0], metas[0], metas[1], metas[1]]
    log = tmp_path / "reward_parts.jsonl"
    env = SelectionRewardEnv(cfg.rewards.selection, True, log, stage="01_act", zero_variance_steps=2)
    with caplog.at_level("WARNING"):
        env.step(flat, batch_metas)
        assert env.warning is None
        env.step(flat, batch_metas)
        env.step(flat, batch_metas)
    assert env.warning and "stage '01_act'" in env.warning and "first 2 logged steps" in env.warning
    assert sum("GRPO gets no signal" in r.message for r in caplog.records) == 1
    assert [json.loads(x)["frac_reward_zero_std"] for x in log.read_text().splitlines()] == [1.0, 1.0, 1.0]
    quiet = SelectionRewardEnv(cfg.rewards.selection, True, None, stage="01_act", zero_variance_steps=2)
    quiet.step(mixed, batch_metas)  # the first group has a correct answer: half the groups carry signal
    quiet.step(flat, batch_metas)
    assert quiet.warning is None
    resumed = SelectionRewardEnv(cfg.rewards.selection, True, None, first_step=5, stage="01_act", zero_variance_steps=1)
    resumed.step(flat, batch_metas)
    assert resumed.warning is None  # a resumed stage has already had its first steps
