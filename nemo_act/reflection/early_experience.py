"""Early Experience, self-reflection (Zhang et al. 2025, arXiv 2510.08558): its training data, built on our protocol.

At every expert state (the same states ACT pairs use):

1. **Alternatives**: K actions other than the expert's (``early_experience.k``; the paper: 3), sampled from
   the initial policy with the action-generation prompt, topped up from the state's admissible list
   (seeded per state) when the samples are unparsable or repeat the expert or each other.
2. **Branching**: the expert action and every alternative are executed from the restored state
   (:mod:`nemo_act.steps.branching`); each one's next observation is recorded.
3. **Reflection**: the initial policy is shown the state and every action's outcome (in a seeded order, by
   their text, no labels) and writes why the expert action is the better step, ending in the action tag
   (``ee_reflection.txt``, ours).
4. **Filter** (:func:`judge`): a reflection is dropped when it concludes on another action or none, says
   "expert", names candidates by number or position, or repeats ``max_quoted_words`` consecutive words of
   the expert's outcome that the state did not already show (narrating an outcome it was given as if
   foreseen).

The audit file ``reflections.jsonl`` keeps, per state, the candidates with their source and outcome, the
generated text and why it was kept or dropped; its manifest has the counts. Each step appends per state
and resumes where a killed build stopped. SFT rows are built from it by
:func:`nemo_act.kinds.reflection.ee_rows` (reflection + expert action, mixed with plain expert rows) and
:func:`nemo_act.kinds.reflection.world_model_rows` (the implicit world-modelling variant: predict each executed
action's next observation).
"""

from __future__ import annotations

import re
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
from nemo_act.generation.base import GenerationRequest
from nemo_act.prompts.render import as_messages, reflection_prompt
from nemo_act.prompts.state import expert_action, iter_states, state_id, trajectory_state
from nemo_act.reflection import build
from nemo_act.rewards import ACTION_OPEN, normalize_action, parse_action, same_action
from nemo_act.steps.branching import BranchRecord, branch_states
from nemo_act.steps.pairs import sampling_request

DropReason = Literal[
    "branch_failed", "no_alternative", "no_action_tag", "concludes_other", "empty", "says_expert",
    "candidate_label", "narrates_outcome",
]  # fmt: skip
_LABEL = re.compile(
    r"\b(action|option|candidate|choice)\s*#?\s*[1-9]\b|\b(first|second|third|fourth|last)\s+(action|option|candidate)\b",
    re.IGNORECASE,
)
BUILD_FILES = ("alternatives.jsonl", "branches.jsonl", "reflections.jsonl")
_EXPERT = re.compile(r"\bexpert", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")


class Candidate(_Record):
    """One action executed at a state: where it came from and what the env showed after it."""

    action: str
    source: Literal["expert", "policy", "admissible"]
    observation: str | None = Field(default=None, description="The env's next observation (None: not executed).")


class AlternativesRecord(_Record):
    """The policy's raw samples at a state and the alternatives chosen from them (resumable step 1)."""

    state_id: str
    samples: list[str]
    alternatives: list[Candidate]


class ReflectionRecord(_Record):
    """The audit line of one state: candidates with outcomes, the generated reflection, kept or why dropped."""

    state_id: str
    trajectory_id: str
    index: int
    expert_action: str
    candidates: list[Candidate] = Field(description="Expert and alternatives, in the order the prompt showed them.")
    reflection: str | None = Field(description="The policy's whole response (None: not asked).")
    kept: bool
    reason: DropReason | Literal["kept"]
    detail: str | None = None


def choose_alternatives(traj: Trajectory, index: int, samples: Sequence[str], k: int, seed: int) -> list[Candidate]:
    """Up to ``k`` distinct non-expert actions: the policy's parsable samples first, then admissible ones.

    The top-up draws from the state's admissible list in a per-state seeded order, so it is the same on a
    resumed run.
    """
    step = traj.steps[index]
    taken = {normalize_action(expert_action(traj, index)), normalize_action(step.action)}
    out: list[Candidate] = []
    for text in samples:
        parsed = parse_action(text)
        if parsed.well_formed and parsed.action and normalize_action(parsed.action) not in taken:
            taken.add(normalize_action(parsed.action))
            out.append(Candidate(action=parsed.action, source="policy"))
    pool = sorted(a for a in step.admissible_actions if normalize_action(a) not in taken and "<" not in a)
    key_rng("ee-topup", seed, state_id(traj, index)).shuffle(pool)
    for action in pool:
        if len(out) >= k:
            break
        if normalize_action(action) not in taken:
            taken.add(normalize_action(action))
            out.append(Candidate(action=action, source="admissible"))
    return out[:k]


def _ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def reflection_body(text: str) -> str:
    """The reasoning of a response: everything before its last action tag, reasoning-block markers removed."""
    cut = text.lower().rfind(ACTION_OPEN)
    body = text[:cut] if cut >= 0 else text
    return re.sub(r"</?think>", " ", body, flags=re.IGNORECASE).strip()


def judge(
    text: str, expert: str, expert_outcome: str, state_text: str, max_quoted_words: int
) -> tuple[DropReason | Literal["kept"], str | None]:
    """Whether a reflection is kept, or the first reason to drop it (with a detail for the audit).

    Args:
        text: The generated response.
        expert: The expert action (the reflection must conclude on it).
        expert_outcome: What the env showed after the expert action.
        state_text: What the state already showed (task, history, observation): words quoted from it are fine.
        max_quoted_words: Consecutive words of the expert's outcome that count as narrating it.
    """
    parsed = parse_action(text)
    if not parsed.well_formed or parsed.action is None:
        return "no_action_tag", parsed.status.value
    if not same_action(parsed.action, expert):
        return "concludes_other", parsed.action
    body = reflection_body(text)
    if len(_WORD.findall(body.lower())) < 3:
        return "empty", None
    if m := _EXPERT.search(body):
        return "says_expert", body[max(m.start() - 30, 0) : m.end() + 30]
    if m := _LABEL.search(body):
        return "candidate_label", m.group(0)
    quoted = (_ngrams(expert_outcome, max_quoted_words) - _ngrams(state_text, max_quoted_words)) & _ngrams(
        body, max_quoted_words
    )
    if quoted:
        return "narrates_outcome", " ".join(sorted(quoted)[0])
    return "kept", None


def _state_text(traj: Trajectory, index: int, cfg: ExperimentConfig) -> str:
    state = trajectory_state(traj, index, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
    past = [f"{h.observation} {h.action}" for h in state.history]
    return "\n".join([state.task_description, *past, state.observation])


def judged(
    traj: Trajectory, index: int, text: str, outcome: str, cfg: ExperimentConfig, max_quoted_words: int
) -> dict[str, Any]:
    """The fields every judged audit record has: its state, the expert's action, and kept or why not.

    Args:
        traj: The expert trajectory.
        index: The state's step index in it.
        text: The generated response (a reflection or a deliberation).
        outcome: What the env showed after the expert action.
        cfg: Experiment config (the state's history and admissible actions, as the prompt showed them).
        max_quoted_words: Consecutive words of the outcome that count as narrating it.
    """
    expert = expert_action(traj, index)
    reason, detail = judge(text, expert, outcome, _state_text(traj, index, cfg), max_quoted_words)
    return {
        "state_id": state_id(traj, index), "trajectory_id": traj.trajectory_id, "index": index,
        "expert_action": expert, "kept": reason == "kept", "reason": reason, "detail": detail,
    }  # fmt: skip


def _alternatives(
    cfg: ExperimentConfig, states: list[tuple[Trajectory, int]], generator: Any, folder: Path, progress: bool
) -> dict[str, list[Candidate]]:
    """Step 1: sample and choose the alternatives of every state (appended per chunk, resumable)."""
    ee = cfg.early_experience

    def work(chunk: list[tuple[Trajectory, int]]) -> list[AlternativesRecord]:
        samples = generator.generate([sampling_request(t, i, cfg) for t, i in chunk], ee.k, ee.sampling, ee.seed)
        return [
            AlternativesRecord(
                state_id=state_id(t, i), samples=s, alternatives=choose_alternatives(t, i, s, ee.k, ee.seed)
            )
            for (t, i), s in zip(chunk, samples, strict=True)
        ]

    out = folder / "alternatives.jsonl"
    records = build.per_state(out, AlternativesRecord, states, ee.chunk, work, "ee alternatives", progress, False)
    return {r.state_id: r.alternatives for r in records}


def _ordered(traj: Trajectory, index: int, expert: Candidate, alts: list[Candidate], seed: int) -> list[Candidate]:
    shown = [expert, *alts]
    key_rng("ee-order", seed, state_id(traj, index)).shuffle(shown)
    return shown


def build_early_experience(
    cfg: ExperimentConfig, experts: str | Path, generator: Any, folder: str | Path, workers: int, progress: bool = True
) -> Summary:
    """Build the Early Experience audit file ``<folder>/reflections.jsonl`` (rows come from it).

    Args:
        cfg: Experiment config (``early_experience``, ``prompt``, ``benchmark``, ``env``).
        experts: Expert trajectories of a benchmark with a live env.
        generator: The initial policy: samples alternatives and writes reflections.
        folder: Build folder: ``alternatives.jsonl``, ``branches.jsonl``, ``reflections.jsonl`` + manifest.
        workers: Env worker processes for branching.
        progress: Show progress bars.

    Returns:
        Counts (states, kept, dropped per reason, alternatives per source) and the audit file. A finished
        build with the same parameters is reused.
    """
    experts, folder = Path(experts), Path(folder)
    out = folder / "reflections.jsonl"
    params = build.params(cfg, "early_experience", experts, policy=generator.name)
    params["max_admissible_shown"] = cfg.benchmark.max_admissible_shown  # also in "benchmark"; kept so builds reuse
    step = ResumableStep.in_folder(folder, out, "early_experience", params, BUILD_FILES)
    if (reused := step.reused()) is not None:  # a finished build with the same parameters
        return reused
    states = list(iter_states(build.begin(step, experts, "Early Experience")))
    alternatives = _alternatives(cfg, states, generator, folder, progress)
    ee = cfg.early_experience
    requests = []
    for t, i in states:
        alts = alternatives[state_id(t, i)]
        if alts:
            requests.append((t, i, [expert_action(t, i), *(a.action for a in alts)]))
    branches: dict[str, BranchRecord] = {
        b.state_id: b for b in branch_states(cfg, requests, folder / "branches.jsonl", workers, progress)
    }
    records = build.per_state(
        out, ReflectionRecord, states, ee.chunk, lambda chunk: _reflect(cfg, chunk, alternatives, branches, generator),
        "ee reflections", progress, True,
    )  # fmt: skip
    write_jsonl(out, records)  # state order, whatever the resume history
    ResumableJsonl(folder / "alternatives.jsonl", AlternativesRecord, key="state_id").finish()
    return step.finish(summarize(records), inputs={"experts": experts})


def _reflect(
    cfg: ExperimentConfig,
    chunk: list[tuple[Trajectory, int]],
    alternatives: dict[str, list[Candidate]],
    branches: dict[str, BranchRecord],
    generator: Any,
) -> list[ReflectionRecord]:
    """Step 3 for a chunk of states: ask for the reflections in one generation call and judge them."""
    ee = cfg.early_experience
    records: dict[str, ReflectionRecord] = {}
    asks: list[tuple[Trajectory, int, list[Candidate], GenerationRequest]] = []
    for t, i in chunk:
        sid, expert = state_id(t, i), expert_action(t, i)
        base = {"state_id": sid, "trajectory_id": t.trajectory_id, "index": i, "expert_action": expert}
        alts = alternatives[sid]
        branch = branches.get(sid)
        if not alts or branch is None or branch.status != "ok":
            reason: DropReason = "no_alternative" if not alts else "branch_failed"
            shown = [Candidate(action=expert, source="expert"), *alts]
            records[sid] = ReflectionRecord(
                **base, candidates=shown, reflection=None, kept=False, reason=reason,
                detail=branch.reason if branch is not None else None,
            )  # fmt: skip
            continue
        seen = {o.action: o.observation for o in branch.outcomes}
        done = Candidate(action=expert, source="expert", observation=seen[expert])
        alts = [a.model_copy(update={"observation": seen[a.action]}) for a in alts]
        shown = _ordered(t, i, done, alts, ee.seed)
        state = trajectory_state(t, i, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
        outcomes = [(c.action, c.observation or "") for c in shown]
        prompt = reflection_prompt(state, outcomes, expert, t.benchmark, cfg.prompt)
        req = GenerationRequest(key=f"{sid}#reflection", messages=as_messages(prompt), gold_action=expert)
        asks.append((t, i, shown, req))
    if asks:
        texts = generator.generate([a[3] for a in asks], 1, ee.reflection_sampling, ee.seed)
        for (t, i, shown, _), (text,) in zip(asks, texts, strict=True):
            outcome = next(c.observation for c in shown if c.source == "expert") or ""
            fields = judged(t, i, text, outcome, cfg, ee.max_quoted_words)
            records[fields["state_id"]] = ReflectionRecord(**fields, candidates=shown, reflection=text)
    return [records[state_id(t, i)] for t, i in chunk]


def summarize(records: Sequence[ReflectionRecord]) -> dict[str, Any]:
    """Counts of an audit file: states, kept, dropped per reason, alternatives per source."""
    sources: dict[str, int] = {}
    for r in records:
        for c in r.candidates:
            if c.source != "expert":
                sources[c.source] = sources.get(c.source, 0) + 1
    return {
        "states": len(records),
        "kept": sum(r.kept for r in records),
        "dropped": build.dropped(records),
        "alternatives": dict(sorted(sources.items())),
        "executed": sum(c.observation is not None for r in records for c in r.candidates),
    }


def read_reflections(path: str | Path) -> list[ReflectionRecord]:
    """An audit file's records (validated; a bad line names file, line and field)."""
    return list(read_jsonl(path, ReflectionRecord))
