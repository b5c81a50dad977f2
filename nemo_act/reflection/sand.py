"""SAND (Xia et al., EMNLP 2025, arXiv 2507.07441): execution-grounded action deliberation, on our protocol.

No public code exists; this follows the procedure in ``ACT-METHOD.md`` with prompts of our own. At every
expert state:

1. **Candidates**: the current policy samples ``sand.candidates`` actions at ``sand.sampling`` (paper: 5 at
   temperature 1; 3 on WebShop) with the action-generation prompt. A state where every parsable sample is
   the expert's action gets no deliberation (``all_expert``); one with no parsable sample neither
   (``no_candidate``).
2. **Roll-on**: the expert action and every distinct other candidate are each executed from the restored
   state (:class:`nemo_act.steps.branching.BranchingEnv`) and the current policy plays on to the episode's end
   (``benchmark.max_steps`` from the episode's start, or ``sand.rollout_steps`` after the candidate), on
   the env worker pool, resumable per episode (:func:`nemo_act.evaluation.rollout.play_starts`). A
   candidate's score is the best the episode reached (0-100, as evaluation counts it).
3. **Critiques**: the frozen initial policy (``critic``, greedy by default) judges each candidate from its
   action, the first ``sand.critique_steps`` steps that followed and the score (``sand_critique.txt``).
4. **Deliberation**: the same frozen policy sees the state and every candidate's critique (a seeded order,
   by their text, no labels) and deliberates towards the expert action (``sand_deliberation.txt``); the
   Early Experience filter (:func:`nemo_act.reflection.early_experience.judge`) drops one that concludes on
   another action, says "expert", labels candidates or narrates the expert's outcome.

The SFT rows (:func:`nemo_act.kinds.reflection.sand_rows`) are the expert trajectories with each kept
deliberation as the thought before the expert's action. The audit file ``deliberations.jsonl`` keeps per
state the candidates (source, the steps that followed, score, critique), the deliberation and kept or why
not; rerunning with a newer checkpoint as ``generator`` is SAND's next iteration (``sand.iterations``:
the pipeline runner does it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from nemo_act.common.seeding import key_rng
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import ResumableJsonl, read_jsonl, write_jsonl
from nemo_act.data.manifest import Summary
from nemo_act.data.records import Trajectory, _Record
from nemo_act.data.resumable import ResumableStep
from nemo_act.evaluation.rollout import EpisodeRecord, Play, play_starts
from nemo_act.generation.base import GenerationRequest
from nemo_act.prompts.render import as_messages, critique_prompt, deliberation_prompt
from nemo_act.prompts.state import expert_action, iter_states, state_id, trajectory_state
from nemo_act.reflection import build
from nemo_act.reflection.early_experience import DropReason, judged, reflection_body
from nemo_act.rewards import normalize_action, parse_action
from nemo_act.steps.branching import BranchingEnv, roll_on_start
from nemo_act.steps.pairs import sampling_request

BUILD_FILES = ("candidates.jsonl", "rollouts.jsonl", "deliberations.jsonl")
SandReason = DropReason | Literal["all_expert", "no_candidate", "rollout_failed", "kept"]


class SampledRecord(_Record):
    """The current policy's raw samples at a state and the distinct non-expert actions among them (step 1)."""

    state_id: str
    samples: list[str]
    actions: list[str]
    expert_samples: int = Field(description="Parsable samples equal to the expert's action.")


class RolledCandidate(_Record):
    """One candidate of a state: where it came from, what followed it, its score and its critique."""

    action: str
    source: Literal["expert", "policy"]
    episode_id: str = Field(description="Its roll-on in rollouts.jsonl.")
    steps: list[tuple[str, str]] = Field(default_factory=list, description="(action, observation after), shown.")
    n_steps: int = 0
    score: float | None = None
    failed: str | None = None
    critique: str | None = None


class DeliberationRecord(_Record):
    """The audit line of one state."""

    state_id: str
    trajectory_id: str
    index: int
    expert_action: str
    samples: list[str] = Field(default_factory=list, description="The policy's raw samples at the state.")
    candidates: list[RolledCandidate] = Field(default_factory=list, description="In the order the prompt showed.")
    deliberation: str | None = None
    kept: bool
    reason: SandReason
    detail: str | None = None


def distinct_actions(samples: Sequence[str], expert: Sequence[str]) -> tuple[list[str], int]:
    """The distinct parsable non-expert actions of ``samples`` (first spelling kept), and how many were the expert's."""
    taken = {normalize_action(a) for a in expert}
    out, same = [], 0
    for text in samples:
        parsed = parse_action(text)
        if not (parsed.well_formed and parsed.action):
            continue
        key = normalize_action(parsed.action)
        if key in {normalize_action(a) for a in expert}:
            same += 1
        elif key not in taken:
            taken.add(key)
            out.append(parsed.action)
    return out, same


def _sample(
    cfg: ExperimentConfig, states: list[tuple[Trajectory, int]], generator: Any, folder: Path, progress: bool
) -> dict[str, SampledRecord]:
    """Step 1: the candidates of every state (appended per chunk on a fixed grid, resumable)."""
    sd = cfg.sand

    def work(chunk: list[tuple[Trajectory, int]]) -> list[SampledRecord]:
        requests = [sampling_request(t, i, cfg) for t, i in chunk]
        out = []
        for (t, i), s in zip(chunk, generator.generate(requests, sd.candidates, sd.sampling, sd.seed), strict=True):
            actions, same = distinct_actions(s, [expert_action(t, i), t.steps[i].action])
            out.append(SampledRecord(state_id=state_id(t, i), samples=s, actions=actions, expert_samples=same))
        return out

    path = folder / "candidates.jsonl"
    records = build.per_state(path, SampledRecord, states, sd.chunk, work, "sand candidates", progress, False)
    return {r.state_id: r for r in records}


def _roll_on(
    cfg: ExperimentConfig,
    states: list[tuple[Trajectory, int]],
    sampled: dict[str, SampledRecord],
    generator: Any,
    folder: Path,
    workers: int,
    progress: bool,
) -> dict[str, EpisodeRecord]:
    """Step 2: roll the expert action and every candidate on with the policy (one episode each, resumable)."""
    sd = cfg.sand
    starts = []
    for t, i in states:
        sid = state_id(t, i)
        if not sampled[sid].actions:
            continue
        budget = None if sd.rollout_steps is None else min(cfg.benchmark.max_steps, i + 1 + sd.rollout_steps)
        starts += [roll_on_start(t, i, action, key, budget) for key, action in _rolled(t, i, sampled[sid].actions)]
    if not starts:
        return {}
    out = folder / "rollouts.jsonl"
    if out.exists():  # finished in an earlier, interrupted build (begin() cleared any other build's)
        finished = {r.episode_id: r for r in read_jsonl(out, EpisodeRecord)}
        if all(s.key in finished for s in starts):
            return finished
    factory = functools.partial(BranchingEnv, cfg.benchmark)
    play = Play(generator, cfg, sd.seed, sd.rollout_sampling, workers, sd.envs_per_worker, progress=progress,
                desc="sand roll-on")  # fmt: skip
    records = play_starts(play, starts, out, factory)
    return {r.episode_id: r for r in records}


def _rolled(t: Trajectory, i: int, actions: list[str]) -> list[tuple[str, str]]:
    """(roll-on episode id, action) of a state's expert action (first) and its candidates."""
    return [(f"{state_id(t, i)}#{j}", a) for j, a in enumerate([expert_action(t, i), *actions])]


def _candidates(t: Trajectory, i: int, actions: list[str], rolled: dict[str, EpisodeRecord], shown: int):
    out = []
    for j, (key, action) in enumerate(_rolled(t, i, actions)):
        r = rolled[key]
        steps = [(s.get("action", ""), s.get("observation", "")) for s in r.steps[:shown]]
        out.append(
            RolledCandidate(
                action=action, source="policy" if j else "expert", episode_id=r.episode_id, steps=steps,
                n_steps=len(r.steps), score=None if r.failed else r.max_score, failed=r.failed,
            )
        )  # fmt: skip
    return out


def _deliberate(
    cfg: ExperimentConfig,
    chunk: list[tuple[Trajectory, int]],
    sampled: dict[str, SampledRecord],
    rolled: dict[str, EpisodeRecord],
    critic: Any,
) -> list[DeliberationRecord]:
    """Steps 3 and 4 for a chunk of states: critiques in one generation call, deliberations in a second."""
    sd = cfg.sand
    records: dict[str, DeliberationRecord] = {}
    asks: list[tuple[Trajectory, int, Any, list[RolledCandidate]]] = []
    for t, i in chunk:
        sid, expert = state_id(t, i), expert_action(t, i)
        s = sampled[sid]
        base = {"state_id": sid, "trajectory_id": t.trajectory_id, "index": i, "expert_action": expert,
                "samples": s.samples}  # fmt: skip
        if not s.actions:
            reason = "all_expert" if s.expert_samples else "no_candidate"
            records[sid] = DeliberationRecord(**base, kept=False, reason=reason)
            continue
        cands = _candidates(t, i, s.actions, rolled, sd.critique_steps)
        failed = next((c for c in cands if c.failed), None)
        if failed is not None:
            records[sid] = DeliberationRecord(**base, candidates=cands, kept=False, reason="rollout_failed",
                                              detail=f"{failed.action}: {failed.failed}")  # fmt: skip
            continue
        state = trajectory_state(t, i, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
        asks.append((t, i, state, cands))
    if asks:
        requests = []
        for t, i, state, cands in asks:
            for j, c in enumerate(cands):
                prompt = critique_prompt(state, c.action, c.steps, float(c.score or 0.0), t.benchmark, cfg.prompt)
                requests.append(GenerationRequest(key=f"{state_id(t, i)}#critique{j}", messages=as_messages(prompt)))
        texts = iter(critic.generate(requests, 1, sd.critic_sampling, sd.seed))
        for _, _, _, cands in asks:
            for j, c in enumerate(cands):
                cands[j] = c.model_copy(update={"critique": reflection_body(next(texts)[0])})
        requests = []
        for t, i, state, cands in asks:
            key_rng("sand-order", sd.seed, state_id(t, i)).shuffle(cands)
            pairs = [(c.action, c.critique or "") for c in cands]
            prompt = deliberation_prompt(state, pairs, expert_action(t, i), t.benchmark, cfg.prompt)
            requests.append(GenerationRequest(key=f"{state_id(t, i)}#deliberation", messages=as_messages(prompt),
                                              gold_action=expert_action(t, i)))  # fmt: skip
        answers = critic.generate(requests, 1, sd.critic_sampling, sd.seed)
        for (t, i, _, cands), (text,) in zip(asks, answers, strict=True):
            mine = next(c for c in cands if c.source == "expert")
            fields = judged(t, i, text, mine.steps[0][1] if mine.steps else "", cfg, sd.max_quoted_words)
            sid = fields["state_id"]
            records[sid] = DeliberationRecord(
                **fields, samples=sampled[sid].samples, candidates=cands, deliberation=text
            )
    return [records[state_id(t, i)] for t, i in chunk]


def build_sand(
    cfg: ExperimentConfig,
    experts: str | Path,
    generator: Any,
    folder: str | Path,
    workers: int,
    progress: bool = True,
    critic: Any | None = None,
) -> Summary:
    """Build the SAND audit file ``<folder>/deliberations.jsonl`` (rows come from it).

    Args:
        cfg: Experiment config (``sand``, ``prompt``, ``benchmark``, ``env``).
        experts: Expert trajectories of a benchmark with a live env (each names its task and variation).
        generator: The current policy: samples the candidates and rolls them on.
        folder: Build folder: ``candidates.jsonl``, ``rollouts.jsonl``, ``deliberations.jsonl`` + manifest.
        workers: Env worker processes for the roll-ons.
        progress: Show progress bars.
        critic: The frozen initial policy that writes critiques and deliberations (default: ``generator``,
            which is the initial policy in SAND's first iteration).

    Returns:
        Counts (states, kept, dropped per reason, candidates, roll-on env steps) and the audit file. A
        finished build with the same parameters is reused.
    """
    experts, folder = Path(experts), Path(folder)
    critic = critic or generator
    out = folder / "deliberations.jsonl"
    params = build.params(cfg, "sand", experts, policy=generator.name, critic=critic.name)
    step = ResumableStep.in_folder(folder, out, "sand", params, BUILD_FILES)
    if (reused := step.reused()) is not None:  # a finished build with the same parameters
        return reused
    states = list(iter_states(build.begin(step, experts, "SAND")))
    sampled = _sample(cfg, states, generator, folder, progress)
    rolled = _roll_on(cfg, states, sampled, generator, folder, workers, progress)
    records = build.per_state(
        out, DeliberationRecord, states, cfg.sand.chunk, lambda chunk: _deliberate(cfg, chunk, sampled, rolled, critic),
        "sand deliberations", progress, True,
    )  # fmt: skip
    write_jsonl(out, records)
    ResumableJsonl(folder / "candidates.jsonl", SampledRecord, key="state_id").finish()
    counts = summarize(records) | {"rollout_env_steps": sum(len(r.steps) for r in rolled.values())}
    return step.finish(counts, inputs={"experts": experts})


def summarize(records: Sequence[DeliberationRecord]) -> dict[str, Any]:
    """Counts of an audit file: states, kept, dropped per reason, candidates rolled on per source."""
    return {
        "states": len(records),
        "kept": sum(r.kept for r in records),
        "dropped": build.dropped(records),
        "candidates": sum(c.source == "policy" for r in records for c in r.candidates),
        "critiques": sum(c.critique is not None for r in records for c in r.candidates),
    }


def read_deliberations(path: str | Path) -> list[DeliberationRecord]:
    """An audit file's records (validated; a bad line names file, line and field)."""
    return list(read_jsonl(path, DeliberationRecord))
