"""The reflection baselines' stage kinds and their row builders.

Each trains on the audit file its data kind's builder writes (:mod:`nemo_act.reflection`): Early Experience
(``ee``: a self-reflection + the expert's action; ``ee_wm``: implicit world modelling), Agent-R (``agent_r``:
revision at the policy's first deviation) and SAND (``sand``: execution-grounded deliberation), all SFT on IL's
budget.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from nemo_act.common.seeding import key_rng
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.records import State, Trajectory
from nemo_act.generation.simple import wrap_action
from nemo_act.kinds.imitation import il_rows
from nemo_act.prompts.render import generation_prompt, world_model_prompt
from nemo_act.prompts.state import build_state, expert_action, state_id, trajectory_state
from nemo_act.reflection.agent_r import RevisionRecord, revision_history
from nemo_act.reflection.early_experience import ReflectionRecord, reflection_body
from nemo_act.stage_data import Row, expert_states, sft_row, sourced
from nemo_act.stage_kinds import StageKind, register


def _mixed(rows: list[Row], trajectories: Sequence[Trajectory], cfg: ExperimentConfig, tag: str) -> list[Row]:
    """``rows`` plus ``expert_rows_per_reflection`` x as many plain IL rows, drawn with a fixed seed."""
    plain = il_rows.__wrapped__(trajectories, cfg)
    n = min(round(cfg.early_experience.expert_rows_per_reflection * len(rows)), len(plain))
    return rows + key_rng(tag, cfg.early_experience.seed).sample(plain, n)


def _record_states(
    records: Sequence[ReflectionRecord], trajectories: Sequence[Trajectory], cfg: ExperimentConfig
) -> Iterator[tuple[ReflectionRecord, Trajectory, State]]:
    """Each audit record with its trajectory and decision state."""
    by_id = {t.trajectory_id: t for t in trajectories}
    for r in records:
        traj = by_id[r.trajectory_id]
        yield r, traj, trajectory_state(traj, r.index, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)


@sourced
def ee_rows(
    records: Sequence[ReflectionRecord], trajectories: Sequence[Trajectory], cfg: ExperimentConfig
) -> list[Row]:
    """Early Experience rows: each kept reflection, then the expert action, after the action-generation prompt."""
    states = _record_states(records, trajectories, cfg)
    kept = [(r, traj, state) for r, traj, state in states if r.kept and r.reflection is not None]
    rows = [
        sft_row(
            generation_prompt(state, traj.benchmark, cfg.prompt),
            f"{reflection_body(r.reflection)}\n{wrap_action(r.expert_action)}",
            state_id(traj, r.index),
        )
        for r, traj, state in kept
    ]
    return _mixed(rows, trajectories, cfg, "ee-mix")


@sourced
def world_model_rows(
    records: Sequence[ReflectionRecord], trajectories: Sequence[Trajectory], cfg: ExperimentConfig
) -> list[Row]:
    """Implicit world-modelling rows: for every executed action of a state, predict the env's next observation."""
    rows = []
    for r, traj, state in _record_states(records, trajectories, cfg):
        for c in r.candidates:
            if c.observation is not None:
                prompt = world_model_prompt(state, c.action, traj.benchmark, cfg.prompt)
                rows.append(sft_row(prompt, c.observation.strip(), state_id(traj, r.index)))
    return _mixed(rows, trajectories, cfg, "wm-mix")


@sourced
def agent_r_rows(
    records: Sequence[RevisionRecord], trajectories: Sequence[Trajectory], cfg: ExperimentConfig
) -> list[Row]:
    """Agent-R rows: the revision turns, then every expert state's own row; wrong turns get no row.

    A revision row's prompt holds the policy's wrong step(s) in its history; its target is the revision turn
    and the expert's action at the branching state.
    """
    by_id = {t.trajectory_id: t for t in trajectories}
    rows = []
    for r in records:
        if not r.kept or r.revision is None:
            continue
        traj = by_id[r.trajectory_id]
        past, observation = revision_history(traj, r)
        assert r.deviation is not None
        state = build_state(
            traj.task_description, past, observation, traj.steps[r.deviation].admissible_actions,
            cfg.prompt.history_k, cfg.benchmark.max_admissible_shown,
            must_include=[expert_action(traj, r.deviation)], key=f"{r.trajectory_id}#revision", context=traj.context,
        )  # fmt: skip
        action = expert_action(traj, r.deviation)
        completion = f"{r.revision}\n{wrap_action(action)}"
        rows.append(
            sft_row(generation_prompt(state, traj.benchmark, cfg.prompt), completion, state_id(traj, r.deviation))
        )
    return rows + il_rows.__wrapped__(trajectories, cfg)


@sourced
def sand_rows(records: Sequence[Any], trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """SAND rows: the expert trajectories, with the kept deliberation as the thought before the expert action.

    Every expert state gets one row (the trajectory is the SFT target); a state with a kept deliberation has
    it before the action, the others the plain expert action (a state whose samples all equal the expert's
    has no deliberation by design).
    """
    thought = {r.state_id: reflection_body(r.deliberation) for r in records if r.kept and r.deliberation}
    rows = []
    for traj, i, state in expert_states(trajectories, cfg):
        think = thought.get(state_id(traj, i))
        action = wrap_action(expert_action(traj, i))
        completion = f"{think}\n{action}" if think else action
        rows.append(sft_row(generation_prompt(state, traj.benchmark, cfg.prompt), completion, state_id(traj, i)))
    return rows


register(
    StageKind(name="ee", algorithm="sft", data="early_experience", rows=f"{__name__}:ee_rows", prompt="generation",
              train="il", label="Early Experience",
              summary="baseline: Early Experience, SFT on a self-reflection + the expert action (IL's budget)"),
    StageKind(name="ee_wm", algorithm="sft", data="early_experience", rows=f"{__name__}:world_model_rows",
              prompt="generation", train="il", label="Early Experience (world model)",
              summary="baseline: Early Experience, implicit world modelling (predict next observations)"),
    StageKind(name="agent_r", algorithm="sft", data="agent_r", rows=f"{__name__}:agent_r_rows", prompt="generation",
              train="il", label="Agent-R",
              summary="baseline: Agent-R, revision at the policy's first deviation + expert rows (IL's budget)"),
    StageKind(name="sand", algorithm="sft", data="sand", rows=f"{__name__}:sand_rows", prompt="generation", train="il",
              rounds="sand.iterations", label="SAND",
              summary="baseline: SAND, execution-grounded deliberation + the expert action (IL's budget)"),
)  # fmt: skip
