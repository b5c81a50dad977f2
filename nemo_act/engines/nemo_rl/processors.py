"""Stage rows -> NeMo-RL datums: our ``nemo_act`` data processor (GRPO and SFT) and DPO's preference records.

Rows come from :mod:`nemo_act.stage_data`, so the messages are the core's prompts; here they are only
rendered with the model's chat template (``model.enable_thinking`` passed through) and tokenized. NeMo-RL
calls :func:`nemo_act_processor` through its ``PROCESSOR_REGISTRY`` on rows its loader reads from a stage's
rows file (:mod:`.datasets`); DPO rows go to NeMo-RL's own ``preference_preprocessor`` as
:func:`preference_record`.
The shapes follow NeMo-RL v0.7.0 (``nemo_rl/data/interfaces.py``): a ``message_log`` of
``{"role", "content", "token_ids"}`` turns whose token ids concatenate to the full sequence,
``length``, ``extra_env_info`` (what the reward environment needs), ``loss_multiplier`` (0 for a
datum cut to ``max_seq_length``, as NeMo-RL's processors do), ``idx``, ``task_name`` and
``stop_strings`` (generation stops after ``</action>``). No NeMo-RL import: these are plain dicts.
"""

from __future__ import annotations

from typing import Any

import torch  # noqa: TID253

from nemo_act.prompts.render import apply_chat_template
from nemo_act.rewards import ACTION_CLOSE
from nemo_act.stage_kinds import REWARD_KINDS, reward_kind, stage_kind

STOP_STRINGS = [ACTION_CLOSE]
# Row keys that are prompt/targets or routing, not reward inputs.
_TEXT_KEYS = frozenset({"prompt", "completion", "chosen", "rejected", "task_name", "enable_thinking"})
# Our processor's name in NeMo-RL's PROCESSOR_REGISTRY (``data.train.processor`` of a stage's config).
PROCESSOR = "nemo_act"
# SFT and DPO rows are routed by these names; a GRPO stage's rows by its reward's environment
# (:attr:`~nemo_act.stage_kinds.RewardKind.environment`: act_selection, act_action, or a registered reward's).
SFT_TASK, DPO_TASK = "act_sft", "act_dpo"


def task_name(kind: str) -> str:
    """The NeMo-RL ``task_name`` of a stage kind's rows (its reward env for GRPO stages)."""
    spec = stage_kind(kind)
    if spec.reward is not None:
        return reward_kind(spec.reward).environment
    return DPO_TASK if spec.algorithm == "dpo" else SFT_TASK


def reward_tasks() -> set[str]:
    """The task names of GRPO rows: every registered reward's environment."""
    return {r.environment for r in REWARD_KINDS.values()}


def _ids(tokenizer: Any, text: str) -> torch.Tensor:
    return torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)


def _cut(turns: list[dict[str, Any]], max_seq_length: int) -> tuple[int, float]:
    """Cut the turns' token ids to ``max_seq_length`` in total; return (length, loss multiplier)."""
    length = sum(len(t["token_ids"]) for t in turns)
    if length <= max_seq_length:
        return length, 1.0
    room = max_seq_length
    for turn in turns:
        turn["token_ids"] = turn["token_ids"][: max(room, 0)]
        room -= len(turn["token_ids"])
    return max_seq_length, 0.0


def _prompt_turn(row: dict[str, Any], tokenizer: Any, enable_thinking: bool | None) -> dict[str, Any]:
    text = apply_chat_template(tokenizer, row["prompt"], enable_thinking)
    return {"role": "user", "content": text, "token_ids": _ids(tokenizer, text)}


def _answer_turn(messages: list[dict[str, str]], tokenizer: Any) -> dict[str, Any]:
    """The assistant turn as it follows the generation header: its text plus the end-of-turn token."""
    text = messages[-1]["content"] + (tokenizer.eos_token or "")
    return {"role": "assistant", "content": text, "token_ids": _ids(tokenizer, text)}


def grpo_datum(
    row: dict[str, Any], idx: int, tokenizer: Any, task_name: str, max_seq_length: int, enable_thinking: bool | None
) -> dict[str, Any]:
    """A GRPO prompt (ACT selection or RL action generation) with its reward inputs.

    Args:
        row: A row of ``kinds.act.act_rows`` or ``kinds.imitation.rl_rows``.
        idx: Datum index.
        tokenizer: The policy's tokenizer (with its chat template).
        task_name: Environment routing key (``act_selection`` or ``act_action``).
        max_seq_length: Longest prompt kept whole; longer ones are cut and masked out.
        enable_thinking: ``model.enable_thinking``.

    Returns:
        A ``DatumSpec``-shaped dict; ``extra_env_info`` holds every non-prompt key of the row.
    """
    turns = [_prompt_turn(row, tokenizer, enable_thinking)]
    length, multiplier = _cut(turns, max_seq_length)
    return {
        "message_log": turns,
        "length": length,
        "extra_env_info": {k: v for k, v in row.items() if k not in _TEXT_KEYS},
        "loss_multiplier": multiplier,
        "idx": idx,
        "task_name": task_name,
        "stop_strings": list(STOP_STRINGS),
    }


def sft_datum(
    row: dict[str, Any], idx: int, tokenizer: Any, max_seq_length: int, enable_thinking: bool | None
) -> dict[str, Any]:
    """An SFT datum (IL, SFT-on-choice): prompt turn + assistant turn; NeMo-RL trains on the assistant's."""
    turns = [_prompt_turn(row, tokenizer, enable_thinking), _answer_turn(row["completion"], tokenizer)]
    length, multiplier = _cut(turns, max_seq_length)
    return {
        "message_log": turns,
        "length": length,
        "extra_env_info": None,
        "loss_multiplier": multiplier,
        "idx": idx,
        "task_name": "act_sft",
    }


def preference_record(row: dict[str, Any]) -> dict[str, Any]:
    """A tagged DPO row in NeMo-RL's preference format, for its own ``preference_preprocessor``.

    ``context`` is the prompt's messages; ``completions`` ranks the expert answer 0 (preferred) and the
    alternative 1 (``nemo_rl/data/processors.py``: "Lower rank is preferred").
    """
    return {
        "context": row["prompt"],
        "completions": [{"rank": 0, "completion": row["chosen"]}, {"rank": 1, "completion": row["rejected"]}],
        "task_name": row["task_name"],
    }


def tag_rows(kind: str, rows: list[dict[str, Any]], enable_thinking: bool | None) -> list[dict[str, Any]]:
    """A stage's rows as the NeMo-RL dataset reads them: each with its ``task_name`` and ``enable_thinking``."""
    name = task_name(kind)
    return [dict(r, task_name=name, enable_thinking=enable_thinking) for r in rows]


def nemo_act_processor(
    datum_dict: dict[str, Any], task_data_spec: Any, tokenizer: Any, max_seq_length: int, idx: int, **_: Any
) -> dict[str, Any]:
    """NeMo-RL ``TaskDataProcessFnCallable`` over a tagged row (:func:`tag_rows`): a GRPO or SFT datum.

    The signature is NeMo-RL v0.7.0's (``nemo_rl/data/interfaces.py``; ``examples/run_sft.py`` also
    binds ``add_bos`` / ``add_eos`` / ``add_generation_prompt``, which our chat rendering decides, so
    they are ignored). ``task_data_spec`` (NeMo-RL's prompt files) is not used: the prompt is the core's.
    """
    name = datum_dict["task_name"]
    thinking = datum_dict.get("enable_thinking")
    if name == SFT_TASK:
        return sft_datum(datum_dict, idx, tokenizer, max_seq_length, thinking)
    if name in reward_tasks():
        return grpo_datum(datum_dict, idx, tokenizer, name, max_seq_length, thinking)
    raise ValueError(
        f"row {idx}: task_name '{name}' is not a GRPO or SFT stage's ({sorted({*reward_tasks(), SFT_TASK})})"
    )
