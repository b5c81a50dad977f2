"""ACT pair construction: K alternatives per expert state from the initial policy.

For every expert state s_i with expert action a+: sample K responses from the policy with the
action-generation prompt, parse each, drop unparsable ones and those equal to a+ (normalised: case,
whitespace, quotes, trailing punctuation; the env's alias spelling counts as a+ too), drop repeats of
an alternative already kept for that state, and pair a+ with every remaining a- in a seeded random
order (a+ first with probability 1/2).

Collection is batched and crash-safe: each state's outcome (raw samples, counts, pairs) is appended
to ``<out>.states.jsonl.partial`` as soon as its batch is done; a re-run with the same parameters
skips finished states, and the final ``<out>`` (pairs) and ``<out>.states.jsonl`` (per-state audit)
are written atomically with a manifest at the end.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from tqdm import tqdm

from nemo_act.common.seeding import key_rng
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import ResumableJsonl, read_all, write_jsonl
from nemo_act.data.manifest import Summary, file_sha256
from nemo_act.data.records import Pair, Trajectory
from nemo_act.data.resumable import ResumableStep
from nemo_act.generation.base import GenerationRequest, Generator, generate_batches
from nemo_act.prompts.length import fit_state, long_action, origin_of, origins, report
from nemo_act.prompts.render import as_messages, generation_prompt
from nemo_act.prompts.state import expert_action, iter_states, state_id, trajectory_state
from nemo_act.rewards import Admissible, normalize_action, parse_action


class StateOutcome(BaseModel):
    """What pair collection did with one expert state (one line of ``<out>.states.jsonl``)."""

    model_config = ConfigDict(extra="forbid")

    state_id: str
    samples: list[str]
    unparsable: int
    duplicate: int
    repeat: int
    pairs: list[Pair]
    leftover: int = 0  # K-way: distinct alternatives too few to fill one more group of N-1
    long: int = 0  # samples whose action is over prompt.max_candidate_chars (a candidate is never cut)
    too_long: bool = False  # the expert action is over prompt.max_candidate_chars: the state is skipped, not sampled
    template: int = 0  # samples that copy a template (a tool entry, search[<query>], the text-reply entry): no action


class DegenerateDataError(ValueError):
    """Pair collection produced too little to train on; the message gives the counts and the likely cause."""


def check_coverage(counts: dict[str, int], min_share: float, out: Path) -> None:
    """Stop when fewer than ``min_share`` of the expert states got a pair (``pairs.min_state_share``).

    Raises:
        DegenerateDataError: With the counts and the most likely cause, read off the drop counts.
    """
    states, covered = counts["states"], counts["states"] - counts["states_without_pair"]
    if not states or covered >= min_share * states:
        return
    sampled = max(counts["sampled"], 1)
    if counts["dropped_unparsable"] >= sampled / 2:
        cause = (
            f"{counts['dropped_unparsable']} of {counts['sampled']} samples have no well-formed <action>...</action>: "
            "the policy cannot write the answer format yet (warm it up with IL first, give it more "
            "pairs.sampling.max_new_tokens, or check its chat template)"
        )
    elif counts["dropped_duplicate"] >= sampled / 2:
        cause = (
            f"{counts['dropped_duplicate']} of {counts['sampled']} samples equal the expert action: the policy "
            "already agrees with the expert on most states (raise pairs.k or pairs.sampling.temperature)"
        )
    else:
        cause = (
            f"samples dropped: {counts['dropped_unparsable']} unparsable, {counts['dropped_duplicate']} equal to expert"
        )
    raise DegenerateDataError(
        f"{out}: only {covered} of {states} expert states ({covered / states:.1%}) got a pair, {counts['pairs']} pairs "
        f"in all, under pairs.min_state_share={min_share:g}. Likely cause: {cause}. The files are kept "
        "(per-state samples in <pairs>.states.jsonl); set pairs.min_state_share=0 to train on them anyway."
    )


def _order_rng(seed: int, pair_id: str) -> random.Random:
    return key_rng("order", seed, pair_id)


def build_outcome(
    traj: Trajectory, index: int, samples: list[str], cfg: ExperimentConfig, policy: str, seed: int
) -> StateOutcome:
    """Turn one state's K samples into pairs.

    Args:
        traj: The expert trajectory.
        index: Step index of the state.
        samples: The K raw policy responses.
        cfg: Experiment config (prompt window, admissible bound).
        policy: Policy name recorded in each pair.
        seed: Seed of the candidate order.

    Returns:
        The state's outcome with its pairs and drop counts.
    """
    step = traj.steps[index]
    expert = expert_action(traj, index)
    expert_forms = {normalize_action(expert), normalize_action(step.action)}
    sid = state_id(traj, index)
    drops = dict.fromkeys(("unparsable", "template", "long", "duplicate", "repeat"), 0)  # StateOutcome's counts
    alternatives: list[str] = []
    listed = Admissible(step.admissible_actions)
    for text in samples:
        parsed = parse_action(text)
        if not parsed.well_formed or parsed.action is None:
            drops["unparsable"] += 1
        elif listed.is_template(parsed.action):
            drops["template"] += 1
        elif len(parsed.action) > cfg.prompt.max_candidate_chars:
            drops["long"] += 1
        elif normalize_action(parsed.action) in expert_forms:
            drops["duplicate"] += 1
        elif any(normalize_action(parsed.action) == normalize_action(a) for a in alternatives):
            drops["repeat"] += 1
        else:
            alternatives.append(parsed.action)
    pairs = []
    n_alt = cfg.pairs.candidates - 1
    groups = [alternatives[i : i + n_alt] for i in range(0, len(alternatives) - n_alt + 1, n_alt)]
    for j, group in enumerate(groups):
        flags = [a in listed for a in group]
        state = trajectory_state(
            traj,
            index,
            cfg.prompt.history_k,
            cfg.benchmark.max_admissible_shown,
            must_include=[a for a, ok in zip(group, flags, strict=True) if ok],
        )
        state = fit_state(state, cfg.prompt)  # the pair stores what its prompt shows
        pair_id = f"{sid}#{j}"
        expert_index = expert_position(seed, pair_id, len(group) + 1)
        candidates = [*group[:expert_index], expert, *group[expert_index:]]
        flags = [*flags[:expert_index], step.action_admissible, *flags[expert_index:]]
        pairs.append(
            Pair(
                pair_id=pair_id,
                state_id=sid,
                benchmark=traj.benchmark,
                state=state,
                expert_action=expert,
                alternative_action=group[0],
                candidates=candidates,
                expert_index=expert_index,
                candidates_admissible=flags,
                policy=policy,
            )
        )
    leftover = len(alternatives) - n_alt * len(groups)
    return StateOutcome(state_id=sid, samples=samples, pairs=pairs, leftover=leftover, **drops)


def _too_long(sid: str) -> StateOutcome:
    return StateOutcome(state_id=sid, samples=[], unparsable=0, duplicate=0, repeat=0, pairs=[], too_long=True)


def expert_position(seed: int, pair_id: str, n: int) -> int:
    """The expert's seeded place among ``n`` candidates: uniform, so each place holds it 1/n of the time.

    For two candidates this is the original coin (``random() < 0.5`` -> first), so 2-way files are unchanged.
    """
    return min(int(_order_rng(seed, pair_id).random() * n), n - 1)


def sampling_request(traj: Trajectory, index: int, cfg: ExperimentConfig) -> GenerationRequest:
    """The sampling request of one expert state (action-generation prompt, as at test time)."""
    state = trajectory_state(traj, index, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
    return GenerationRequest(
        key=state_id(traj, index),
        messages=as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
        admissible_actions=traj.steps[index].admissible_actions,
        exclude=[expert_action(traj, index), traj.steps[index].action],
    )


def _params(cfg: ExperimentConfig, policy: str, experts: Path, k: int, seed: int) -> dict[str, Any]:
    n = cfg.pairs.candidates
    return {
        **({"candidates": n} if n != 2 else {}),  # 2-way keeps the parameters of files made before K-way existed
        "policy": policy,
        "k": k,
        "seed": seed,
        "sampling": cfg.pairs.sampling.model_dump(),
        "prompt": cfg.prompt.model_dump(),
        "max_admissible_shown": cfg.benchmark.max_admissible_shown,
        "enable_thinking": cfg.model.enable_thinking,
        "experts_sha256": file_sha256(experts),
        **({"max_states": cfg.pairs.max_states} if cfg.pairs.max_states is not None else {}),  # set: a smoke run
    }


def summarize(outcomes: Sequence[StateOutcome], k: int) -> dict[str, int]:
    """Counts over state outcomes (the manifest's ``counts``)."""
    pairs = [p for o in outcomes for p in o.pairs]
    return {
        "states": len(outcomes),
        "sampled": sum(len(o.samples) for o in outcomes),
        "dropped_unparsable": sum(o.unparsable for o in outcomes),
        "dropped_duplicate": sum(o.duplicate for o in outcomes),
        "dropped_repeat": sum(o.repeat for o in outcomes),
        "dropped_template": sum(o.template for o in outcomes),
        "states_all_duplicate": sum(1 for o in outcomes if o.duplicate == k),
        "states_without_pair": sum(1 for o in outcomes if not o.pairs),
        "pairs": len(pairs),
        "expert_first": sum(1 for p in pairs if p.expert_index == 0),
        "alternative_admissible": sum(
            1 for p in pairs if all(f for i, f in enumerate(p.candidates_admissible) if i != p.expert_index)
        ),
        "states_too_few_alternatives": sum(1 for o in outcomes if not o.pairs and o.leftover),  # K-way
        "dropped_leftover": sum(o.leftover for o in outcomes),
        "dropped_too_long": sum(o.long for o in outcomes),
        "states_too_long": sum(o.too_long for o in outcomes),
    }


def collect_pairs(
    experts: str | Path,
    generator: Generator,
    cfg: ExperimentConfig,
    out: str | Path,
    k: int | None = None,
    seed: int | None = None,
    progress: bool = True,
) -> Summary:
    """Sample alternatives for every expert state and write ACT pairs.

    Args:
        experts: Expert trajectories (JSONL of :class:`~nemo_act.data.records.Trajectory`).
        generator: The initial policy (HF model, or ``random``).
        cfg: Experiment config (``pairs`` holds K, seed and sampling).
        out: Pairs JSONL to write; ``<out>.states.jsonl`` and ``<out>.manifest.json`` go beside it.
        k: Overrides ``cfg.pairs.k``.
        seed: Overrides ``cfg.pairs.seed``.
        progress: Show a progress bar.

    Returns:
        The counts and the output path. A finished ``out`` made with the same parameters is reused.

    Raises:
        DegenerateDataError: Fewer than ``pairs.min_state_share`` of the states got a pair (the files are
            written first; see :func:`check_coverage`).
    """
    experts, out = Path(experts), Path(out)
    k = cfg.pairs.k if k is None else k
    seed = cfg.pairs.seed if seed is None else seed
    trajectories = read_all(experts, Trajectory, "expert trajectories")
    states = list(iter_states(trajectories))[: cfg.pairs.max_states]
    states_file = out.with_name(out.name + ".states.jsonl")
    step = ResumableStep.beside(out, "pairs", _params(cfg, generator.name, experts, k, seed))
    finished = step.reused()
    if finished is not None:
        check_coverage(finished.counts, cfg.pairs.min_state_share, out)
        return finished
    step.begin()
    with ResumableJsonl(states_file, StateOutcome, key="state_id") as log:
        # a state whose expert action is over the action budget is skipped before sampling, counted and named
        long = [(t, i) for t, i in states if long_action(t, i, cfg.prompt.max_candidate_chars)]
        where = origins(trajectories, experts)
        report(
            f"pairs ({experts})",
            [
                (origin_of(state_id(t, i), where), f"expert action of {len(expert_action(t, i)):,} characters")
                for t, i in long
            ],
            len(states),
            f"states: their expert action is over prompt.max_candidate_chars ({cfg.prompt.max_candidate_chars:,})",
        )
        skip = {state_id(t, i) for t, i in long}
        log.append(_too_long(state) for state in sorted(skip - log.done_keys))
        done = log.done_keys
        batch_size = cfg.generation.batch_size
        bar = tqdm(total=len(states), initial=len(done), desc="pairs", unit="state", disable=not progress)
        # Batches sit on a fixed grid over the full state list and are seeded by their first state,
        # so a resumed run samples exactly what an uninterrupted run would; with several engines
        # (generation.engines) the batches run on all of them and come back in grid order. A batch that a kill
        # cut short is asked for whole again (a backend seeded per batch, HF, samples by the batch it sees) and
        # only its missing states are kept.
        grid = [states[s : s + batch_size] for s in range(0, len(states), batch_size)]
        todo = [g for g in grid if any(state_id(t, i) not in done for t, i in g)]
        requests = ([sampling_request(t, i, cfg) for t, i in batch] for batch in todo)
        with bar:
            answers = generate_batches(generator, requests, k, cfg.pairs.sampling, seed)
            for batch, samples in zip(todo, answers, strict=True):
                missing = [(t, i, s) for (t, i), s in zip(batch, samples, strict=True) if state_id(t, i) not in done]
                log.append(build_outcome(t, i, s, cfg, generator.name, seed) for t, i, s in missing)
                bar.update(len(missing))
    outcomes = log.ordered(state_id(t, i) for t, i in states)  # file order, whatever the resume history
    log.finish()
    write_jsonl(states_file, outcomes)
    write_jsonl(out, [p for o in outcomes for p in o.pairs])
    summary = step.finish(summarize(outcomes, k), inputs={"experts": experts})
    check_coverage(summary.counts, cfg.pairs.min_state_share, out)
    return summary


def build_policy_pairs(
    cfg: ExperimentConfig,
    experts: str | Path,
    generator: Generator,
    folder: str | Path,
    workers: int,
    progress: bool = True,
    critic: Generator | None = None,
) -> Summary:
    """The ``policy_pairs`` data kind: ACT pairs sampled by the checkpoint an ``act_onpolicy`` round starts from.

    :func:`collect_pairs` into ``<folder>/pairs.jsonl`` (the same file, manifest and resume as the runner's pairs);
    ``workers`` and ``critic`` are the data-kind builder's arguments, unused (no env, no frozen critic).

    Returns:
        The pairs' counts, with ``kept`` (pairs) and ``dropped`` (samples by reason) as every builder reports them.
    """
    del workers, critic
    summary = collect_pairs(experts, generator, cfg, Path(folder) / "pairs.jsonl", progress=progress)
    c = summary.counts
    dropped = {k.removeprefix("dropped_"): v for k, v in c.items() if k.startswith("dropped_") and v}
    return Summary(counts={**c, "kept": c["pairs"], "dropped": dropped}, out=summary.out)
