"""Agent-R as the ACT paper describes it (Yuan et al. 2025, arXiv 2501.11425): revision at the first deviation.

For every expert episode, the current policy plays the same episode from its start in the live env
(:func:`nemo_act.evaluation.rollout.run_episodes`: batched generation, the env worker pool with call
deadlines and restarts, resumable per episode). :func:`first_deviation` finds the first step where the
rollout leaves the expert trajectory: its action differs from the expert's (normalised) **and** the
observation that followed differs from the expert's next one (a differently spelled action that reaches
the same state is no deviation; where the env cannot show that, the action alone decides).

The revision trajectory is the erroneous prefix (the expert's steps before the deviation, then
``agent_r.error_steps`` steps of the policy's wrong path), a short revision turn
(``agent_r_revision.txt``, ours: it names the wrong action, what followed, and the action to take
instead), and the expert's action from the branching state, followed by the rest of the expert trajectory.
With nemo-act's state prompts (the last k steps as history) that becomes SFT rows
(:func:`nemo_act.kinds.reflection.agent_r_rows`): one row whose prompt holds the wrong step(s) in its history
and whose target is the revision turn + the expert's action, and the expert trajectories' own rows for
every other turn. The wrong turns get no row: the loss covers only the revision and the corrected turns.

The audit file ``revisions.jsonl`` keeps per expert episode the rollout's actions, where it deviated, the
wrong steps, the revision text, and kept or why not (the rollout followed the expert; it failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import read_jsonl, write_jsonl
from nemo_act.data.manifest import Summary
from nemo_act.data.records import Trajectory, _Record
from nemo_act.data.resumable import ResumableStep
from nemo_act.evaluation.rollout import EpisodeRecord, Play, episode_id, run_episodes
from nemo_act.prompts.render import template
from nemo_act.prompts.state import expert_action
from nemo_act.reflection import build
from nemo_act.rewards import same_action


class WrongStep(_Record):
    """One step of the policy's wrong path: the observation it acted on, its action, what followed."""

    observation: str
    action: str
    next_observation: str


class RevisionRecord(_Record):
    """The audit line of one expert episode."""

    trajectory_id: str
    rollout_actions: list[str] = Field(description="The policy's actions in its rollout of the episode.")
    deviation: int | None = Field(description="Step index of the first deviation (None: none).")
    wrong: list[WrongStep] = Field(default_factory=list, description="The wrong path kept before the revision.")
    revision: str | None = None
    kept: bool
    reason: Literal["kept", "followed_expert", "rollout_failed", "no_rollout"]
    detail: str | None = None


def _same_text(a: str, b: str) -> bool:
    return a.split() == b.split()


def first_deviation(
    expert: Trajectory, actions: Sequence[str], observations: Sequence[str] | None = None
) -> int | None:
    """The first step where a rollout leaves the expert trajectory, or None when it never does.

    Args:
        expert: The expert trajectory of the episode.
        actions: The rollout's actions, from the episode's start.
        observations: What the env showed after each rollout action (None: compare actions only).

    Returns:
        The step index, counted from the episode's start; None when every rollout step up to the end of
        the shorter of the two matches.
    """
    for j, action in enumerate(actions[: len(expert.steps)]):
        if same_action(action, expert_action(expert, j)) or same_action(action, expert.steps[j].action):
            continue
        reached_same = (
            observations is not None
            and j < len(observations)
            and j + 1 < len(expert.steps)
            and _same_text(observations[j], expert.steps[j + 1].observation)
        )
        if not reached_same:
            return j
    return None


def revision_text(wrong: WrongStep, action: str, max_chars: int) -> str:
    """The revision turn (``agent_r_revision.txt``): the wrong action, what followed, what to do instead."""
    seen = " ".join(wrong.next_observation.split())
    seen = seen if len(seen) <= max_chars else seen[: max_chars - 3] + "..."
    return template("agent_r_revision").format(wrong=wrong.action, observation=seen, action=action)


def revise(
    expert: Trajectory, rollout_steps: Sequence[dict[str, Any]], error_steps: int, max_chars: int
) -> RevisionRecord:
    """The revision of one episode from its rollout's step records (``action``, ``observation`` after it).

    The observation a wrong step acted on is the expert's at the deviation (the states agree up to there),
    then the one the previous wrong step led to.
    """
    actions = [s.get("action", "") for s in rollout_steps]
    after = [s.get("observation", "") for s in rollout_steps]
    base = {"trajectory_id": expert.trajectory_id, "rollout_actions": actions}
    b = first_deviation(expert, actions, after)
    if b is None:
        return RevisionRecord(**base, deviation=None, kept=False, reason="followed_expert")
    wrong, seen = [], expert.steps[b].observation
    for j in range(b, min(b + error_steps, len(rollout_steps))):
        wrong.append(WrongStep(observation=seen, action=actions[j], next_observation=after[j]))
        seen = after[j]
    text = revision_text(wrong[-1], expert_action(expert, b), max_chars)
    return RevisionRecord(**base, deviation=b, wrong=wrong, revision=text, kept=True, reason="kept")


def revision_history(expert: Trajectory, record: RevisionRecord) -> tuple[list[tuple[str, str]], str]:
    """The past (observation, action) pairs and the current observation of a record's revision turn."""
    assert record.deviation is not None
    past = [(s.observation, expert_action(expert, i)) for i, s in enumerate(expert.steps[: record.deviation])]
    past += [(w.observation, w.action) for w in record.wrong]
    return past, record.wrong[-1].next_observation


def build_agent_r(
    cfg: ExperimentConfig, experts: str | Path, generator: Any, folder: str | Path, workers: int, progress: bool = True
) -> Summary:
    """Roll out the policy on every expert episode and write the audit file ``<folder>/revisions.jsonl``.

    Args:
        cfg: Experiment config (``agent_r``, ``prompt``, ``benchmark``, ``env``).
        experts: Expert trajectories of a benchmark with a live env (each names its task and variation).
        generator: The current policy.
        folder: Build folder: ``rollouts/`` (episodes.jsonl, resumable) and ``revisions.jsonl`` + manifest.
        workers: Env worker processes.
        progress: Show progress bars.

    Returns:
        Counts (episodes, kept, why not) and the audit file; a finished build with the same parameters is reused.
    """
    experts, folder = Path(experts), Path(folder)
    out = folder / "revisions.jsonl"
    params = build.params(cfg, "agent_r", experts, policy=generator.name)
    step = ResumableStep.in_folder(folder, out, "agent_r", params, ("rollouts", "revisions.jsonl"))
    if (reused := step.reused()) is not None:  # a finished build with the same parameters
        return reused
    trajectories = build.begin(step, experts, "Agent-R")
    episodes = [(t.task_id, int(t.variation or 0)) for t in trajectories]
    gold = {episode_id(cfg.benchmark.name, t, v): traj for (t, v), traj in zip(episodes, trajectories, strict=True)}
    ar = cfg.agent_r
    play = Play(generator, cfg, ar.seed, ar.sampling, workers, ar.envs_per_worker, gold, progress, "agent-r rollouts")
    run_episodes(play, episodes, folder / "rollouts")
    rollouts = {r.episode_id: r for r in read_jsonl(folder / "rollouts" / "episodes.jsonl", EpisodeRecord)}
    records = []
    for t in trajectories:
        r = rollouts.get(episode_id(cfg.benchmark.name, t.task_id, int(t.variation or 0)))
        if r is None:
            records.append(RevisionRecord(trajectory_id=t.trajectory_id, rollout_actions=[], deviation=None,
                                          kept=False, reason="no_rollout"))  # fmt: skip
        elif r.failed:
            records.append(RevisionRecord(trajectory_id=t.trajectory_id, rollout_actions=[], deviation=None,
                                          kept=False, reason="rollout_failed", detail=r.failed))  # fmt: skip
        else:
            records.append(revise(t, r.steps, ar.error_steps, cfg.prompt.max_observation_chars))
    write_jsonl(out, records)
    return step.finish(summarize(records), inputs={"experts": experts})


def summarize(records: Sequence[RevisionRecord]) -> dict[str, Any]:
    """Counts of an audit file: episodes, kept revisions, why the others have none, where deviations were."""
    deviations = [r.deviation for r in records if r.deviation is not None]
    return {
        "episodes": len(records),
        "kept": sum(r.kept for r in records),
        "dropped": build.dropped(records),
        "mean_deviation_step": sum(deviations) / len(deviations) if deviations else None,
    }


def read_revisions(path: str | Path) -> list[RevisionRecord]:
    """An audit file's records (validated; a bad line names file, line and field)."""
    return list(read_jsonl(path, RevisionRecord))
