"""TRL reward functions over the core's rewards: one function per part, so TRL logs each.

Any reward of the registry (:data:`~nemo_act.stage_kinds.REWARD_KINDS`, yours included) becomes the same five
functions: GRPO sums them with ``reward_weights``; the parts (accuracy, admissible, format) weigh 1, and two
monitors weigh 0 and are only logged: for a selection reward ``selection_accuracy`` (share of responses naming
the expert action) and ``named_neither`` (well-formed responses naming neither candidate), else
``expert_match``. TRL logs each as ``rewards/<name>/mean``. A row's fields reach the score as TRL hands them to
reward functions: one keyword per dataset column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nemo_act.common.plugins import load
from nemo_act.config.schema import ExperimentConfig
from nemo_act.rewards import RewardParts
from nemo_act.stage_data import reward_values
from nemo_act.stage_kinds import reward_kind

RewardFunc = Callable[..., list[float]]
_NOT_FIELDS = frozenset({"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric"})


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        return "".join(m.get("content", "") for m in completion)
    return str(completion)


def reward_funcs(reward: str, cfg: ExperimentConfig) -> tuple[list[RewardFunc], list[float]]:
    """TRL reward functions and their weights of a registered reward.

    Args:
        reward: A :data:`~nemo_act.stage_kinds.REWARD_KINDS` name (a stage kind's ``reward``).
        cfg: The experiment config (the reward's values block, the benchmark's ``admissible_reward``).
    """
    spec = reward_kind(reward)
    score = load(spec.score)
    values, use_adm = reward_values(reward, cfg), cfg.benchmark.admissible_reward

    def parts(completions: list[Any], columns: dict[str, list[Any]]) -> list[RewardParts]:
        fields = {k: v for k, v in columns.items() if k not in _NOT_FIELDS and isinstance(v, list | tuple)}
        rows = [{k: v[i] for k, v in fields.items()} for i in range(len(completions))]
        return [score(_text(c), row, values, use_adm) for c, row in zip(completions, rows, strict=True)]

    def make(name: str, pick: Callable[[RewardParts], float]) -> RewardFunc:
        def fn(prompts: list[Any], completions: list[Any], **columns: list[Any]) -> list[float]:
            return [pick(r) for r in parts(completions, columns)]

        fn.__name__ = name
        return fn

    funcs = [
        make("accuracy", lambda r: r.accuracy),
        make("admissible", lambda r: r.admissible),
        make("format", lambda r: r.format),
    ]
    if spec.selection:
        funcs += [
            make("selection_accuracy", lambda r: float(r.correct)),
            make("named_neither", lambda r: float(r.named_neither)),
        ]
    else:
        funcs += [make("expert_match", lambda r: float(r.correct))]
    return funcs, [1.0, 1.0, 1.0] + [0.0] * (len(funcs) - 3)


def selection_reward_funcs(cfg: ExperimentConfig) -> tuple[list[RewardFunc], list[float]]:
    """Reward functions and weights of the ACT stage (the ``selection`` reward)."""
    return reward_funcs("selection", cfg)


def action_reward_funcs(cfg: ExperimentConfig) -> tuple[list[RewardFunc], list[float]]:
    """Reward functions and weights of the RL stage (the ``action`` reward)."""
    return reward_funcs("action", cfg)
