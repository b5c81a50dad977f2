"""Whether a GRPO stage gets any learning signal: the share of groups whose responses all scored the same.

GRPO's advantage is a reward minus its group's mean, so a group whose G responses score alike contributes
nothing; when every group does for the first steps of a stage (a policy that cannot write the answer tag
yet scores the format penalty on all of them), the stage "trains" with loss 0 and gradient norm 0.
:class:`NoSignalWatch` turns the per-step share of such groups into one warning; the local engine feeds
it TRL's ``frac_reward_zero_std``, the cluster engine's reward environment its own :func:`zero_std_share`
of each scored batch. Engine-free.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def zero_std_share(totals: Sequence[float], groups: Sequence[Hashable]) -> float:
    """The share of groups (responses with the same key) whose total rewards are all equal.

    Args:
        totals: Total reward of each response.
        groups: The group key of each response (its prompt).
    """
    by_group: dict[Hashable, set[float]] = {}
    for total, key in zip(totals, groups, strict=True):
        by_group.setdefault(key, set()).add(round(float(total), 6))
    return sum(len(v) == 1 for v in by_group.values()) / max(len(by_group), 1)


class NoSignalWatch:
    """Collects the first ``steps`` steps' zero-variance share and mean reward; says once when all are 1.

    Args:
        stage: The stage's name (for the message).
        steps: Steps to watch (``train.<stage>.zero_variance_steps``; 0: off).
    """

    def __init__(self, stage: str, steps: int) -> None:
        self.stage, self.steps = stage, steps
        self.seen: list[tuple[float, float]] = []
        self.fired = False

    def observe(self, zero_std: float, mean_reward: float) -> str | None:
        """Record one step; return the warning the first time the watched steps all lacked signal."""
        if self.fired or not self.steps:
            return None
        if len(self.seen) < self.steps:
            self.seen.append((float(zero_std), float(mean_reward)))
        if len(self.seen) == self.steps and all(frac >= 1.0 for frac, _ in self.seen):
            self.fired = True
            rewards = sorted({round(r, 4) for _, r in self.seen})
            return (
                f"stage '{self.stage}': in its first {self.steps} logged steps every group of responses had the same "
                f"reward (mean rewards {rewards}): GRPO gets no signal (advantages 0, loss 0). Likely cause: the "
                "policy never (or always) earns the reward, e.g. it cannot write <action>...</action> yet; check "
                "the stage's completions, warm it up with IL, or raise num_generations / temperature."
            )
        return None
