"""Policies without a model: ``random`` (uniform over admissible actions) and ``gold`` (the expert).

They answer in the same format a model does (``<action>...</action>``), so every consumer parses
all policies the same way.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from nemo_act.config.schema import SamplingConfig
from nemo_act.generation.base import GenerationRequest
from nemo_act.rewards import ACTION_CLOSE, ACTION_OPEN, normalize_action
from nemo_act.seeding import key_rng


def wrap_action(action: str) -> str:
    """Format an action the way a policy answers."""
    return f"{ACTION_OPEN}{action}{ACTION_CLOSE}"


def _rng(seed: int, key: str) -> random.Random:
    return key_rng(seed, key)


class RandomGenerator:
    """Uniform over the admissible actions, minus the request's ``exclude`` list.

    A request with no admissible action left yields an empty response (parsed as malformed).
    """

    name = "random"

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int
    ) -> list[list[str]]:
        """Sample ``n`` admissible actions per request (seeded per request key)."""
        out: list[list[str]] = []
        for req in requests:
            banned = {normalize_action(a) for a in req.exclude}
            # sorted: the env's list order is not stable (ScienceWorld's varies between JVMs), the set is
            pool = sorted(a for a in req.admissible_actions if normalize_action(a) not in banned)
            rng = _rng(seed, req.key)
            out.append([wrap_action(rng.choice(pool)) if pool else "" for _ in range(n)])
        return out


class GoldGenerator:
    """Replays the expert action of each request (a ceiling for evaluation)."""

    name = "gold"

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int
    ) -> list[list[str]]:
        """Return the gold action ``n`` times per request."""
        out = []
        for req in requests:
            if req.gold_action is None:
                raise ValueError(f"gold policy: request {req.key} carries no gold action")
            out.append([wrap_action(req.gold_action)] * n)
        return out
