"""Build decision states s_t from expert trajectories.

s_t = task description + the last k observation-action pairs + step number + current observation +
the admissible actions a prompt shows (a bounded subset, see :mod:`nemo_act.prompts.admissible`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from nemo_act.data.records import HistoryItem, State, Trajectory
from nemo_act.prompts.admissible import select_admissible


def state_id(trajectory: Trajectory, index: int) -> str:
    """Stable id of the state before step ``index`` (0-based) of a trajectory."""
    return f"{trajectory.trajectory_id}/{index}"


def expert_action(trajectory: Trajectory, index: int) -> str:
    """The expert action at a step, spelled as the env's valid list spells it when they differ."""
    step = trajectory.steps[index]
    return step.admissible_alias or step.action


def build_state(
    task_description: str,
    past: Sequence[tuple[str, str]],
    observation: str,
    admissible: Sequence[str],
    history_k: int,
    max_shown: int,
    must_include: Sequence[str] = (),
    key: str = "",
    context: str = "",
) -> State:
    """Build a state from raw parts (used by expert states and by live evaluation episodes).

    Args:
        task_description: The task.
        past: All earlier (observation, action) pairs of the episode, oldest first.
        observation: The current observation.
        admissible: The env's full admissible list now.
        history_k: How many of the latest past pairs to keep.
        max_shown: Bound on the admissible actions shown.
        must_include: Actions that must be shown (expert and candidates at training time).
        key: Stable key for the subset's tie-breaking.
        context: Standing instructions shown before the task (a trace's system prompt; '' for none).

    Returns:
        The state (step number = len(past) + 1).
    """
    recent = past[-history_k:] if history_k > 0 else []
    shown = select_admissible(
        admissible, f"{task_description}\n{observation}", max_shown, must_include=must_include, key=key
    )
    return State(
        task_description=task_description,
        context=context,
        history=[HistoryItem(observation=o, action=a) for o, a in recent],
        step=len(past) + 1,
        observation=observation,
        admissible_actions=shown,
    )


def trajectory_state(
    trajectory: Trajectory,
    index: int,
    history_k: int,
    max_shown: int,
    must_include: Sequence[str] = (),
) -> State:
    """The state before step ``index`` of an expert trajectory; the expert action is always shown."""
    past = [(s.observation, expert_action(trajectory, i)) for i, s in enumerate(trajectory.steps[:index])]
    step = trajectory.steps[index]
    return build_state(
        trajectory.task_description,
        past,
        step.observation,
        step.admissible_actions,
        history_k,
        max_shown,
        must_include=[expert_action(trajectory, index), *must_include],
        key=state_id(trajectory, index),
        context=trajectory.context,
    )


def iter_states(trajectories: Sequence[Trajectory]) -> Iterator[tuple[Trajectory, int]]:
    """Yield (trajectory, step index) for every expert state, in file order."""
    for traj in trajectories:
        for i in range(len(traj.steps)):
            yield traj, i
