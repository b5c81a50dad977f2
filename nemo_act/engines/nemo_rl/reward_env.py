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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from nemo_act.config.schema import RewardValues, SelectionRewardConfig
from nemo_act.rewards import RewardParts, action_reward, selection_reward

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


class SelectionRewardEnv:
    """ACT stage: score which candidate the response names (only its final ``<action>``).

    Args:
        values: ``rewards.selection``.
        use_admissible: ``benchmark.admissible_reward`` (False for WebShop).
    """

    def __init__(self, values: SelectionRewardConfig | dict, use_admissible: bool) -> None:
        self.values = SelectionRewardConfig.model_validate(values)
        self.use_admissible = use_admissible

    def step(self, message_log_batch: list[list[dict[str, Any]]], metadata: list[dict[str, Any]]) -> EnvStep:
        """Score a batch of responses; ``metadata[i]`` has candidates, expert_index, candidates_admissible."""
        parts = [
            selection_reward(
                _last_answer(log),
                meta["candidates"],
                meta["expert_index"],
                meta["candidates_admissible"],
                self.values,
                self.use_admissible,
                meta.get("admissible_actions", ()),
            )
            for log, meta in zip(message_log_batch, metadata, strict=True)
        ]
        return _step(parts)


class ActionRewardEnv:
    """RL stage: score a directly generated action against the expert's.

    Args:
        values: ``rewards.action``.
        use_admissible: ``benchmark.admissible_reward``.
    """

    def __init__(self, values: RewardValues | dict, use_admissible: bool) -> None:
        self.values = RewardValues.model_validate(values)
        self.use_admissible = use_admissible

    def step(self, message_log_batch: list[list[dict[str, Any]]], metadata: list[dict[str, Any]]) -> EnvStep:
        """Score a batch of responses; ``metadata[i]`` has expert_action and admissible_actions."""
        parts = [
            action_reward(
                _last_answer(log), meta["expert_action"], meta["admissible_actions"], self.values, self.use_admissible
            )
            for log, meta in zip(message_log_batch, metadata, strict=True)
        ]
        return _step(parts)
