"""Lengths: which expert states are too long to show, and the token-exact check of a stage's rows.

Two rules keep every sequence a stage trains on inside ``model.max_context_tokens``:

1. **Budgets per part**, in characters, applied when a prompt is rendered (:mod:`nemo_act.prompts.render`): the
   task, the standing instructions, each observation and each past action keep their first
   ``prompt.max_*_chars`` characters. The actions the model must answer (the expert's, a pair's candidates)
   are never cut: a state whose expert action is over ``prompt.max_candidate_chars`` is skipped when pairs are
   built, and a sampled alternative over it is dropped; each is counted (a row with such an action is left to 2).
2. **A token-exact check** of every row with the tokenizer of the checkpoint the stage starts from
   (:class:`RowLengths`): prompt + completion (SFT), prompt + the longer answer (DPO) or prompt +
   ``train.<stage>.max_completion_length`` (GRPO) must fit ``model.max_context_tokens``; a row that does not is
   skipped, counted and named by the file and line of the trace it came from.

Budgets are characters, not tokens, because prompts are rendered in the engine-free core, before (and without)
any tokenizer, and pair files are shared between models; the token check is where the model's tokenizer is
known. A row too long to tokenize cheaply (more characters than ``max_context_tokens`` times the longest token of
the vocabulary) is known to be too long without tokenizing it: a 10 MB argument never reaches a tokenizer.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nemo_act.config.schema import PromptConfig
from nemo_act.data.records import HistoryItem, State, Trajectory
from nemo_act.prompts.state import expert_action

Row = dict[str, Any]
SOURCE_KEY = "_state"  # the state a row was built from: row builders set it, stage_data takes it off


def cut(text: str, limit: int) -> str:
    """The text (stripped) in at most ``limit`` characters: its first ``limit - 3`` and ``...`` when it was longer."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fit_state(state: State, cfg: PromptConfig) -> State:
    """The state as a prompt shows it: every part cut to its budget (the admissible list is bounded already).

    Rendering cuts the same way, so a fitted state renders the same prompt; a record that stores a state (a pair)
    stores this one, not a 10 MB history action that no prompt shows.
    """
    return state.model_copy(
        update={
            "task_description": cut(state.task_description, cfg.max_task_chars),
            "context": cut(state.context, cfg.max_context_chars),
            "observation": cut(state.observation, cfg.max_observation_chars),
            "history": [
                HistoryItem(
                    observation=cut(h.observation, cfg.max_observation_chars),
                    action=cut(h.action, cfg.max_action_chars),
                )
                for h in state.history
            ],
        }
    )


def long_action(traj: Trajectory, index: int, max_chars: int) -> bool:
    """Whether the expert action of a state is over ``prompt.max_candidate_chars`` (its state is skipped)."""
    return len(expert_action(traj, index)) > max_chars


def origins(trajectories: Sequence[Trajectory], path: str | Path) -> dict[str, str]:
    """Where each trajectory came from: its own ``origin`` (a trace's ``file:line``), else ``path:line``."""
    return {t.trajectory_id: t.origin or f"{path}:{n}" for n, t in enumerate(trajectories, start=1)}


def origin_of(state: str, where: dict[str, str]) -> str:
    """The ``file:line`` of a state id (``{trajectory_id}/{step}``, a pair id adds ``#j``)."""
    traj, _, step = state.split("#")[0].rpartition("/")
    return f"{where.get(traj, traj)} (step {int(step) + 1})" if step.isdigit() else where.get(state, state)


def report(stage: str, skipped: Sequence[tuple[str, str]], total: int, why: str, limit: int = 5) -> None:
    """One line per skipped item (the first ``limit``) on stderr, so a long job's log says what it left out."""
    if not skipped:
        return
    print(f"{stage}: skipped {len(skipped)} of {total} {why}", file=sys.stderr)
    for where, detail in skipped[:limit]:
        print(f"  {where}: {detail}", file=sys.stderr)
    if len(skipped) > limit:
        print(f"  ... and {len(skipped) - limit} more", file=sys.stderr)


class RowLengths:
    """Token counts of stage rows with one tokenizer (the checkpoint a stage starts from).

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template.
        enable_thinking: ``model.enable_thinking``, passed to the chat template as the engines do.
    """

    def __init__(self, tokenizer: Any, enable_thinking: bool | None) -> None:
        self.tokenizer = tokenizer
        self.kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
        vocab = tokenizer.get_vocab()
        # the most characters one token can stand for: a longer text has more tokens than this bound says
        self.max_token_chars = max(len(tokenizer.convert_tokens_to_string([t])) for t in vocab) or 1

    @classmethod
    def from_checkpoint(cls, path: str, enable_thinking: bool | None) -> RowLengths:
        """The tokenizer of a Hugging Face checkpoint (folder or hub id; no weights are read)."""
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(path), enable_thinking)

    def _count(self, text: str, limit: int) -> int:
        """Tokens of ``text``; ``limit + 1`` where it is surely over ``limit`` (not tokenized)."""
        if len(text) > limit * self.max_token_chars:
            return limit + 1
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def tokens(self, row: Row, reserve: int, limit: int) -> int:
        """Tokens the row's longest sequence holds: prompt + its longest answer, or prompt + ``reserve`` (GRPO).

        Args:
            row: A stage row (``prompt`` and ``completion`` or ``chosen``/``rejected`` chat messages).
            reserve: Tokens to add for an answer the trainer generates (GRPO rows have none written).
            limit: Counting stops being exact above this (the result is then ``limit + 1`` or more).
        """
        prompt = self.tokenizer.apply_chat_template(
            row["prompt"], tokenize=False, add_generation_prompt=True, **self.kwargs
        )
        answers = [row[k] for k in ("completion", "chosen", "rejected") if k in row]
        n = self._count(prompt, limit)
        if not answers or n > limit:
            return n + reserve
        return n + max(self._count("".join(m["content"] for m in a), limit) + 1 for a in answers)  # + end token


def fit_rows(
    rows: Sequence[Row],
    sources: Sequence[str],
    lengths: RowLengths | None,
    limit: int,
    reserve: int,
    where: dict[str, str],
) -> tuple[list[Row], list[tuple[str, str]]]:
    """The rows that fit ``limit`` tokens, and what was skipped.

    Args:
        rows: The stage's rows.
        sources: The state each row was built from (what its builder put under :data:`SOURCE_KEY`).
        lengths: The stage's tokenizer; None keeps every row (no tokenizer: a dry run).
        limit: ``model.max_context_tokens``.
        reserve: Tokens a GRPO stage generates per prompt (0 for SFT and DPO).
        where: Trajectory id -> ``file:line`` (:func:`origins`).

    Returns:
        (kept rows, [(file:line, why)] of the skipped ones).
    """
    kept: list[Row] = []
    skipped: list[tuple[str, str]] = []
    for row, source in zip(rows, sources, strict=True):
        if lengths is not None and (n := lengths.tokens(row, reserve, limit)) > limit:
            over = f"more than {limit:,}" if n > limit + reserve else f"{n:,}"
            skipped.append((origin_of(source, where), f"{over} tokens{' with the answer' if reserve else ''}"))
            continue
        kept.append(row)
    return kept, skipped
