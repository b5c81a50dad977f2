"""Stage rows -> NeMo-RL datums (``DatumSpec`` for GRPO and SFT, ``PreferenceDatumSpec`` for DPO).

Rows come from :mod:`nemo_act.stage_data`, so the messages are the core's prompts; here they are only
rendered with the model's chat template (``model.enable_thinking`` passed through) and tokenized.
The shapes follow NeMo-RL v0.7.0 (``nemo_rl/data/interfaces.py``): a ``message_log`` of
``{"role", "content", "token_ids"}`` turns whose token ids concatenate to the full sequence,
``length``, ``extra_env_info`` (what the reward environment needs), ``loss_multiplier`` (0 for a
datum cut to ``max_seq_length``, as NeMo-RL's processors do), ``idx``, ``task_name`` and
``stop_strings`` (generation stops after ``</action>``). No NeMo-RL import: these are plain dicts.
"""

from __future__ import annotations

from typing import Any

import torch

from nemo_act.prompts.render import apply_chat_template
from nemo_act.stage_data import ALGORITHM

STOP_STRINGS = ["</action>"]
# Row keys that are prompt/targets, not reward inputs.
_TEXT_KEYS = frozenset({"prompt", "completion", "chosen", "rejected"})


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
        row: A row of ``stage_data.act_rows`` or ``stage_data.rl_rows``.
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


def dpo_datum(
    row: dict[str, Any], idx: int, tokenizer: Any, max_seq_length: int, enable_thinking: bool | None
) -> dict[str, Any]:
    """A DPO datum: the same prompt with the expert (chosen) and the alternative (rejected) answer."""
    out: dict[str, Any] = {"idx": idx, "loss_multiplier": 1.0}
    for side in ("chosen", "rejected"):
        turns = [_prompt_turn(row, tokenizer, enable_thinking), _answer_turn(row[side], tokenizer)]
        length, multiplier = _cut(turns, max_seq_length)
        out[f"message_log_{side}"], out[f"length_{side}"] = turns, length
        out["loss_multiplier"] = min(out["loss_multiplier"], multiplier)
    return out


def stage_datums(
    kind: str,
    rows: list[dict[str, Any]],
    tokenizer: Any,
    task_name: str | None,
    max_seq_length: int,
    enable_thinking: bool | None,
) -> list[dict[str, Any]]:
    """All datums of a stage: GRPO prompts (``task_name`` set), SFT or DPO examples.

    Args:
        kind: Stage kind (``act``, ``act_noreason``, ``rl``: GRPO; ``il``, ``sft_choice``: SFT; ``dpo``).
        rows: The stage's rows (:func:`nemo_act.stage_data.rows_for`).
        tokenizer: The policy's tokenizer.
        task_name: Reward environment of a GRPO stage (None for SFT and DPO).
        max_seq_length: Longest datum kept whole (longer ones are cut and masked out).
        enable_thinking: ``model.enable_thinking``.

    Returns:
        One datum per row, ``idx`` = row index.
    """
    if kind not in ALGORITHM:
        raise ValueError(f"unknown stage '{kind}'")
    if ALGORITHM[kind] == "grpo":
        if task_name is None:
            raise ValueError(f"stage {kind}: a GRPO stage needs its reward environment's task_name")
        return [grpo_datum(r, i, tokenizer, task_name, max_seq_length, enable_thinking) for i, r in enumerate(rows)]
    datum = dpo_datum if ALGORITHM[kind] == "dpo" else sft_datum
    return [datum(r, i, tokenizer, max_seq_length, enable_thinking) for i, r in enumerate(rows)]
