"""Policies without a model: ``random``, ``gold`` and ``from_data``.

``random`` is uniform over the admissible actions, ``gold`` replays the expert, ``from_data`` draws other expert
actions of the same data (pair alternatives).

They answer in the same format a model does (``<action>...</action>``), so every consumer parses
all policies the same way.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from nemo_act.common.seeding import key_rng
from nemo_act.config.schema import SamplingConfig
from nemo_act.generation.base import GenerationRequest, close_generator, generate_batches, seeds_each_request
from nemo_act.rewards import ACTION_CLOSE, ACTION_OPEN, Admissible, normalize_action


def wrap_action(action: str) -> str:
    """Format an action the way a policy answers."""
    return f"{ACTION_OPEN}{action}{ACTION_CLOSE}"


def _rng(seed: int, key: str) -> random.Random:
    return key_rng(seed, key)


NOT_MODELS = ("random", "gold", "from_data")  # the policies here, by the names a config gives them (no model)


class _PoolPolicy:
    """A policy that answers each request with ``n`` uniform draws from a pool of actions.

    Seeded per request key; a request whose pool is empty gets empty responses (parsed as malformed).
    """

    name: str
    key_prefix = ""  # of the per-request seed
    seeds_each_request = True

    def _pool(self, req: GenerationRequest, banned: set[str]) -> list[str]:
        raise NotImplementedError

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int
    ) -> list[list[str]]:
        """Draw ``n`` actions per request from its pool, minus its ``exclude`` list (seeded per request key)."""
        out: list[list[str]] = []
        for req in requests:
            pool = self._pool(req, {normalize_action(a) for a in req.exclude})
            rng = _rng(seed, self.key_prefix + req.key)
            out.append([wrap_action(rng.choice(pool)) if pool else "" for _ in range(n)])
        return out


class RandomGenerator(_PoolPolicy):
    """Uniform over the admissible actions, minus the request's ``exclude`` list.

    A state whose list holds tool entries has no concrete call to draw (the policy cannot invent a reservation id;
    an entry copied is a template, never admissible), so the random policy refuses it, naming ``from_data``.
    WebShop's ``search[<query>]`` stays drawable: the env runs it (a search for the text ``<query>``), so the random
    baseline can leave the search page; as a pair candidate it is a template and dropped (``dropped_template``).
    """

    name = "random"

    def _pool(self, req: GenerationRequest, banned: set[str]) -> list[str]:
        listed = Admissible(req.admissible_actions)
        if listed.tools:
            raise ValueError(
                f"state {req.key}: the random policy has no concrete action to draw: this state lists tools as "
                f"templates ({next(iter(listed.tools.values()))}), and a template is never admissible; use "
                "pipeline.pairs_policy=from_data (other expert actions of the file: real calls and replies) or a model"
            )
        # sorted: the env's list order is not stable (ScienceWorld's varies between JVMs), the set is
        return sorted(a for a in req.admissible_actions if normalize_action(a) not in banned)


class GoldGenerator:
    """Replays the expert action of each request (a ceiling for evaluation)."""

    name = "gold"
    seeds_each_request = True  # samples nothing

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


class DataGenerator(_PoolPolicy):
    """Alternatives drawn from the data's own expert actions (``pairs_policy: from_data``).

    For each request: the expert actions of the file being paired (its other states) that the request's
    admissible list allows, minus its ``exclude`` (the state's expert action), uniform and seeded per request
    key; where a state lists no admissible actions, any of them. On agent traces these are real calls (a listed
    tool with arguments someone used, another listed tool, a text reply) where the random policy can only return
    a tool's template (``get_weather(<arguments: ...>)``), which no model writes: trivial pairs. A request whose
    pool is empty gets empty responses (no pair; counted as unparsable).

    Args:
        actions: The expert actions to draw from (those of the experts file being paired).
        max_chars: ``prompt.max_candidate_chars``: a longer action is never drawn (a candidate is never cut, so it
            could only be dropped).
    """

    name = "from_data"
    key_prefix = "from_data/"

    def __init__(self, actions: Sequence[str], max_chars: int) -> None:
        by_norm = {normalize_action(a): a for a in actions if len(a) <= max_chars}
        self.actions = [(k, by_norm[k]) for k in sorted(by_norm)]  # one spelling each, in a fixed order

    def _pool(self, req: GenerationRequest, banned: set[str]) -> list[str]:
        listed = Admissible(req.admissible_actions) if req.admissible_actions else None
        return [a for norm, a in self.actions if norm not in banned and (listed is None or a in listed)]


class MixedGenerator:
    """A policy's samples followed by ``k`` draws from the data's own actions (``pairs.from_data_k``).

    Each request gets the policy's ``n`` samples, then ``k`` alternatives of :class:`DataGenerator` (seeded per
    request key as it is on its own), so a state's pairs mix what the model would write with real actions of the
    file. Batches pass through the policy's own ``generate_batches`` where it has one (several engines).

    Args:
        policy: The sampling policy (a model, or ``random``).
        data: The data's actions.
        k: Draws per request from ``data``.
    """

    def __init__(self, policy: Any, data: DataGenerator, k: int) -> None:
        self.policy, self.data, self.k = policy, data, k
        self.name = f"{policy.name}+from_data*{k}"

    @property
    def seeds_each_request(self) -> bool:
        """As its policy (the data draws are seeded per request key)."""
        return seeds_each_request(self.policy)

    def close(self) -> None:
        """Free what the policy holds (an engine pool)."""
        close_generator(self.policy)

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int
    ) -> list[list[str]]:
        """``n`` policy samples then ``k`` data draws per request."""
        drawn = self.data.generate(requests, self.k, sampling, seed)
        return [s + d for s, d in zip(self.policy.generate(requests, n, sampling, seed), drawn, strict=True)]

    def generate_batches(
        self, batches: Iterable[Sequence[GenerationRequest]], n: int, sampling: SamplingConfig, seed: int
    ) -> Iterator[list[list[str]]]:
        """As :meth:`generate` over batches, in order, the policy's batches running as it runs them."""
        taken: deque[Sequence[GenerationRequest]] = deque()

        def tap() -> Iterator[Sequence[GenerationRequest]]:
            for batch in batches:
                taken.append(batch)
                yield batch

        for samples in generate_batches(self.policy, tap(), n, sampling, seed):
            drawn = self.data.generate(taken.popleft(), self.k, sampling, seed)
            yield [s + d for s, d in zip(samples, drawn, strict=True)]
