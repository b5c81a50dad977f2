"""ACT selection accuracy on held-out pairs: free generation, and the forced-choice pick.

* Free generation: the model answers the selection prompt; the core's selection reward says whether
  it named the expert action, the alternative, neither candidate, or wrote no well-formed action.
* Forced choice: which of the two ``<action>candidate</action>`` answers the model finds more
  likely (needs a generator that can score continuations, e.g. the HF backend). It shows what the
  model prefers even when its free answers are malformed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nemo_act.config.schema import ExperimentConfig, SamplingConfig
from nemo_act.data.records import Pair
from nemo_act.evaluation.stats import proportion
from nemo_act.generation.base import GenerationRequest, Generator
from nemo_act.generation.simple import wrap_action
from nemo_act.prompts.render import as_messages, selection_prompt
from nemo_act.rewards import selection_reward


def _requests(pairs: Sequence[Pair], cfg: ExperimentConfig) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            key=p.pair_id, messages=as_messages(selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt))
        )
        for p in pairs
    ]


Outcome = str  # "expert", "alternative", "neither" or "malformed"


def classify(pair: Pair, text: str, cfg: ExperimentConfig) -> tuple[Outcome, Any]:
    """What a selection response chose: the expert, the alternative, neither candidate, or nothing well-formed.

    Returns:
        The outcome and the selection reward's parts (``action``, ``total``).
    """
    r = selection_reward(
        text,
        pair.candidates,
        pair.expert_index,
        pair.candidates_admissible,
        cfg.rewards.selection,
        cfg.benchmark.admissible_reward,
        pair.state.admissible_actions,
    )
    if r.correct:
        return "expert", r
    if r.chosen_index is not None:
        return "alternative", r
    return ("neither" if r.named_neither else "malformed"), r


def selection_requests(pairs: Sequence[Pair], cfg: ExperimentConfig) -> list[GenerationRequest]:
    """The selection prompt of each pair as a generation request (key: the pair id)."""
    return _requests(pairs, cfg)


def selection_sampling(cfg: ExperimentConfig) -> SamplingConfig:
    """How a checkpoint answers a held-out pair: ``eval.sampling`` with ``eval.selection_max_new_tokens``."""
    return cfg.eval.sampling.model_copy(update={"max_new_tokens": cfg.eval.selection_max_new_tokens})


def free_selection(
    generator: Generator, pairs: Sequence[Pair], cfg: ExperimentConfig, sampling: SamplingConfig, seed: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate one answer per pair and score it.

    Returns:
        Summary (accuracy, alternative, neither, malformed shares with standard errors; accuracy when
        the expert is shown first / second) and one row per pair (response, parsed action, outcome).
    """
    responses = generator.generate(_requests(pairs, cfg), 1, sampling, seed)
    rows = []
    for p, (text,) in zip(pairs, responses, strict=True):
        outcome, r = classify(p, text, cfg)
        rows.append(
            {
                "pair_id": p.pair_id,
                "expert_index": p.expert_index,
                "response": text,
                "action": r.action,
                "outcome": outcome,
                "reward": r.total,
            }
        )
    n = len(rows)
    count = {k: sum(row["outcome"] == k for row in rows) for k in ("expert", "alternative", "neither", "malformed")}
    summary = {
        "accuracy": proportion(count["expert"], n),
        "picked_alternative": proportion(count["alternative"], n),
        "named_neither": proportion(count["neither"], n),
        "malformed": proportion(count["malformed"], n),
        "accuracy_expert_first": proportion(
            sum(r["outcome"] == "expert" for r in rows if r["expert_index"] == 0),
            sum(r["expert_index"] == 0 for r in rows),
        ),
        "accuracy_expert_second": proportion(
            sum(r["outcome"] == "expert" for r in rows if r["expert_index"] == 1),
            sum(r["expert_index"] == 1 for r in rows),
        ),
        "chance": chance(pairs),
    }
    return summary, rows


def chance(pairs: Sequence[Pair]) -> float:
    """The accuracy of a uniform guess among each pair's candidates (1/2 for pairs; 1/N in K-way selection)."""
    return sum(1 / len(p.candidates) for p in pairs) / len(pairs) if pairs else float("nan")


def forced_choice(scorer: Any, pairs: Sequence[Pair], cfg: ExperimentConfig) -> dict[str, Any]:
    """Share of pairs whose expert answer the model finds more likely than every other candidate's answer.

    Args:
        scorer: Object with ``score(requests, continuations) -> list[float]`` (HF backend).
        pairs: Held-out pairs (2 candidates each, or N in K-way selection).
        cfg: Experiment config (prompt settings).

    Returns:
        ``{"accuracy": proportion, "picked_first": proportion, "chance": 1/N}`` (a tie goes to the earlier candidate).
    """
    requests = _requests(pairs, cfg)
    repeated = [r for r, p in zip(requests, pairs, strict=True) for _ in p.candidates]
    continuations = [wrap_action(c) for p in pairs for c in p.candidates]
    scores = iter(scorer.score(repeated, continuations))
    picks = []
    for p in pairs:
        mine = [next(scores) for _ in p.candidates]
        picks.append(mine.index(max(mine)))
    correct = sum(pick == p.expert_index for pick, p in zip(picks, pairs, strict=True))
    return {
        "accuracy": proportion(correct, len(pairs)),
        "picked_first": proportion(picks.count(0), len(pairs)),
        "chance": chance(pairs),
    }
