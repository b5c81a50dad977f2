"""A GRPO stage that gets no learning signal says so: every group with one reward for its first steps.

GRPO's advantage is a reward minus its group's mean, so a group whose G responses all score the same
contributes nothing; when every group does (a policy that cannot write the answer tag yet scores 0 on
all of them), the stage "trains" with loss 0 and gradient norm 0 without a word. TRL's GRPOTrainer
logs the share of such groups per logging step (``frac_reward_zero_std``); this callback warns once
when it is 1 for the first ``train.<stage>.zero_variance_steps`` logged steps, with the mean reward
and what usually causes it.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from transformers import TrainerCallback

log = logging.getLogger(__name__)


class ZeroRewardVarianceWarning(UserWarning):
    """Every GRPO group of a stage's first logged steps had a single reward value."""


class ZeroVarianceWatch(TrainerCallback):
    """Warns when a GRPO stage's first ``steps`` logged steps have zero reward variance in every group."""

    def __init__(self, stage: str, steps: int) -> None:
        """Args: stage: the stage kind (for the message); steps: logged steps to watch (0: off)."""
        self.stage, self.steps = stage, steps
        self.seen: list[tuple[float, float]] = []  # (frac_reward_zero_std, mean reward) per logged step
        self.warned = False

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kwargs: Any) -> None:
        """Collect the first logged steps' zero-variance share; warn once if all are 1."""
        if self.warned or not self.steps or not logs or "frac_reward_zero_std" not in logs:
            return
        if len(self.seen) < self.steps:
            self.seen.append((float(logs["frac_reward_zero_std"]), float(logs.get("reward", float("nan")))))
        if len(self.seen) == self.steps and all(frac >= 1.0 for frac, _ in self.seen):
            self.warned = True
            rewards = sorted({round(r, 4) for _, r in self.seen})
            msg = (
                f"stage '{self.stage}': in its first {self.steps} logged steps every group of responses had the same "
                f"reward (mean rewards {rewards}): GRPO gets no signal (advantages 0, loss 0). Likely cause: the "
                "policy never (or always) earns the reward, e.g. it cannot write <action>...</action> yet; check "
                "the stage's completions, warm it up with IL, or raise num_generations / temperature."
            )
            log.warning(msg)
            warnings.warn(msg, ZeroRewardVarianceWarning, stacklevel=2)
