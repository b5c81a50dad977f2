"""The ACT selection reward and the RL action reward as batched environments (engine-free).

Each class has NeMo-RL's ``EnvironmentInterface.step(message_log_batch, metadata)`` signature and
returns :class:`EnvStep`, whose fields are those of NeMo-RL's ``EnvironmentReturn``. Rewards are a
``[B, 3]`` tensor, one column per part in :data:`REWARD_PARTS` (R_acc, R_adm, R_fmt): measured with
NeMo-RL v0.7.0, its rollout sums the columns into the total reward and keeps each column, so every
part shows in the training logs; with ``rewards.selection.correct = 1`` the ``accuracy`` column's mean
is the selection accuracy. Scoring is :mod:`nemo_act.rewards`; the metadata of each sample is the
datum's ``extra_env_info`` (see :mod:`nemo_act.engines.nemo_rl.processors`).

Both classes are plain Python: NeMo-RL runs them as Ray actors through its registry, and the tests
run them under a real local Ray.

NeMo-RL v0.7.0's GRPO logs only the total reward (the columns stay in the batch as ``reward1..3``) and
never calls ``global_post_process_and_metrics``, so each environment also appends one JSON line per
``step`` call (one GRPO step: the rollout scores a step's whole batch in one call per environment)
to ``log_path``: the mean of every part, the selection accuracy and the share of answers naming
neither candidate. The driver merges these lines into the stage's ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch  # noqa: TID253

from nemo_act.common.plugins import load
from nemo_act.config.schema import values_model
from nemo_act.data.io import write_text_atomic
from nemo_act.rewards import ParseStatus, RewardParts
from nemo_act.rewards.signal import NoSignalWatch, zero_std_share
from nemo_act.stage_kinds import import_extensions, reward_kind

log = logging.getLogger(__name__)

REWARD_PARTS = ("accuracy", "admissible", "format")


class EnvStep(NamedTuple):
    """The fields of NeMo-RL's ``EnvironmentReturn`` (all batched)."""

    observations: list[dict[str, str]]
    metadata: list[dict[str, Any] | None]
    next_stop_strings: list[list[str] | None]
    rewards: torch.Tensor
    terminateds: torch.Tensor
    answers: list[str | None]


def _last_answer(message_log: Sequence[dict[str, Any]]) -> str:
    """The text of the last assistant turn (the policy's response)."""
    for turn in reversed(message_log):
        if turn["role"] == "assistant":
            return str(turn["content"])
    return ""


def _step(parts: list[RewardParts]) -> EnvStep:
    rewards = torch.tensor([[p.accuracy, p.admissible, p.format] for p in parts], dtype=torch.float32)
    return EnvStep(
        observations=[{"role": "environment", "content": f"Environment: {p.status}"} for p in parts],
        metadata=[None] * len(parts),  # one turn: every episode ends here
        next_stop_strings=[None] * len(parts),
        rewards=rewards.reshape(len(parts), len(REWARD_PARTS)),
        terminateds=torch.ones(len(parts), dtype=torch.bool),
        answers=[p.action for p in parts],
    )


def _group_key(meta: dict[str, Any]) -> str:
    """The prompt a response answers, read off its metadata (a group's G responses share the datum's)."""
    return json.dumps(meta, sort_keys=True, default=str)


def batch_summary(
    parts: Sequence[RewardParts], selection: bool, groups: Sequence[str] | None = None
) -> dict[str, float]:
    """Means of one scored batch.

    Every reward part, the total and the malformed share; for ACT also the selection accuracy (share
    naming the expert) and the share naming neither candidate; with ``groups`` (one key per response),
    ``frac_reward_zero_std``, the share of groups whose responses all got the same total (TRL's name).
    """
    n = max(len(parts), 1)
    out = {name: sum(getattr(p, name) for p in parts) / n for name in REWARD_PARTS}
    out["total"] = sum(p.total for p in parts) / n
    out["malformed"] = sum(p.status != ParseStatus.OK for p in parts) / n
    if selection:
        out["selection_accuracy"] = sum(p.accuracy > 0 for p in parts) / n
        out["named_neither"] = sum(p.named_neither for p in parts) / n
    if groups is not None:
        out["frac_reward_zero_std"] = zero_std_share([p.total for p in parts], groups)
    out["n"] = len(parts)
    return out


class _Logged:
    """Appends :func:`batch_summary` of every step to ``log_path`` (None: no log); warns once on no signal.

    The warning (logging, which Ray forwards to the job's output) comes when the first
    ``zero_variance_steps`` steps gave GRPO no signal (:class:`~nemo_act.rewards.signal.NoSignalWatch`).
    ``first_step`` is the GRPO step a resumed stage restarts after (its newest checkpoint's): lines
    are numbered from there, so a requeued stage's reward parts line up with NeMo-RL's own steps.
    """

    selection = False

    def __init__(
        self, log_path: str | Path | None, first_step: int = 0, stage: str = "", zero_variance_steps: int = 0
    ) -> None:
        self.log_path = Path(log_path) if log_path else None
        self.calls = first_step
        self.watch = NoSignalWatch(stage, zero_variance_steps if first_step == 0 else 0)
        self.warning: str | None = None

    def _log(self, parts: list[RewardParts], metadata: Sequence[dict[str, Any]]) -> None:
        self.calls += 1
        summary = batch_summary(parts, self.selection, [_group_key(m) for m in metadata])
        msg = self.watch.observe(summary["frac_reward_zero_std"], summary["total"])
        if msg:
            self.warning = msg
            log.warning(msg)
        if self.log_path is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"call": self.calls, **summary})
        with open(self.log_path, "a") as fh:  # one short line per call: an append is whole or absent
            fh.write(line + "\n")


class ScoredRewardEnv(_Logged):
    """A registered reward (:data:`~nemo_act.stage_kinds.REWARD_KINDS`) as a batched environment.

    Each sample's metadata is its row's fields (the datum's ``extra_env_info``), which the reward's score reads,
    as the local engine's reward functions do from TRL's columns: both engines score the same fields.

    Args:
        reward: The reward's name.
        values: Its values block (``rewards.selection``, ``rewards.action``), a model or a plain dict.
        use_admissible: ``benchmark.admissible_reward`` (False for WebShop).
        log_path: JSONL file that gets one summary line per ``step`` (None: no log).
        first_step: Step the stage resumes after (0 for a fresh stage).
        stage: The stage's name, for the no-signal warning.
        zero_variance_steps: ``train.<block>.zero_variance_steps`` (0: no warning; a resumed stage never warns).
        extensions: The config's ``extensions``, imported first (a Ray actor is a fresh process: a reward of yours
            is registered there by importing its module).
    """

    def __init__(
        self,
        reward: str,
        values: Any,
        use_admissible: bool,
        log_path: str | Path | None = None,
        first_step: int = 0,
        stage: str = "",
        zero_variance_steps: int = 0,
        extensions: Sequence[str] = (),
    ) -> None:

        super().__init__(log_path, first_step, stage, zero_variance_steps)
        import_extensions(extensions, f"reward environment {reward}")
        spec = reward_kind(reward)
        self.selection = spec.selection
        self.score = load(spec.score)
        self.values = values_model(spec.values).model_validate(values)
        self.use_admissible = use_admissible

    def step(self, message_log_batch: list[list[dict[str, Any]]], metadata: list[dict[str, Any]]) -> EnvStep:
        """Score a batch of responses; ``metadata[i]`` holds the fields of response i's row."""
        parts = [
            self.score(_last_answer(log), meta, self.values, self.use_admissible)
            for log, meta in zip(message_log_batch, metadata, strict=True)
        ]
        self._log(parts, metadata)
        return _step(parts)


class _ShippedRewardEnv(ScoredRewardEnv):
    """A reward nemo-act ships, named by the subclass (``reward``).

    Takes :class:`ScoredRewardEnv`'s arguments after ``reward`` (``values``, ``use_admissible``, ``log_path``, ...).
    """

    reward: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(self.reward, *args, **kwargs)


class SelectionRewardEnv(_ShippedRewardEnv):
    """ACT stage: score which candidate the response names (only its final ``<action>``; ``rewards.selection``)."""

    reward = "selection"


class ActionRewardEnv(_ShippedRewardEnv):
    """RL stage: score a directly generated action against the expert's (``rewards.action``)."""

    reward = "action"


def resume_reward_log(log_path: str | Path, step: int) -> None:
    """Keep the lines of steps ``<= step`` (a resumed stage redoes the steps after its checkpoint).

    Rewritten atomically; a missing log stays missing.
    """
    path = Path(log_path)
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["call"] <= step]
    write_text_atomic(path, "".join(line + "\n" for line in kept))
