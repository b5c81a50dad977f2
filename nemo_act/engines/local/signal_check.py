"""The local engine's no-signal warning: TRL's ``frac_reward_zero_std`` fed to the core's ``NoSignalWatch``.

TRL's GRPOTrainer logs the share of groups whose responses all scored the same per logging step
(``frac_reward_zero_std``); this callback warns once when it is 1 for the first
``train.<stage>.zero_variance_steps`` logged steps, with the mean reward and what usually causes it.
"""

from __future__ import annotations

import warnings
from typing import Any

from transformers import TrainerCallback  # noqa: TID253

from nemo_act.rewards.signal import NoSignalWatch


class ZeroRewardVarianceWarning(UserWarning):
    """Every GRPO group of a stage's first logged steps had a single reward value."""


class ZeroVarianceWatch(TrainerCallback):
    """Warns when a GRPO stage's first ``steps`` logged steps have zero reward variance in every group."""

    def __init__(self, stage: str, steps: int) -> None:
        """Args: stage: the stage kind (for the message); steps: logged steps to watch (0: off)."""
        self.watch = NoSignalWatch(stage, steps)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kwargs: Any) -> None:
        """Feed each logged step's zero-variance share to the watch; warn when it fires."""
        if not logs or "frac_reward_zero_std" not in logs:
            return
        if state.global_step > self.watch.steps * max(1, int(args.logging_steps)):
            return  # past the stage's first logged steps (a resumed stage does not count again from its resume)
        msg = self.watch.observe(float(logs["frac_reward_zero_std"]), float(logs.get("reward", float("nan"))))
        if msg:  # once, as a warning (it reaches the console once; logging it as well printed it twice)
            warnings.warn(msg, ZeroRewardVarianceWarning, stacklevel=2)
