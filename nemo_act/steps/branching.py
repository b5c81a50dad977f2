"""Env branching: from a recorded expert state, execute candidate actions and record what the env shows.

The reflection baselines (Early Experience, SAND, Agent-R) need the outcome of actions the expert did
not take. A state is restored by replaying the expert's action prefix in a fresh episode of the
benchmark's live env (:func:`nemo_act.benchmarks.base.restore`, which checks every replayed observation
against the record), then one candidate is executed; every candidate gets its own replay, so no
candidate sees another's effects. :class:`BranchingEnv` does the same inside an evaluation env worker, so
the policy can play on from a branched state to the episode's end (SAND's roll-on,
:func:`nemo_act.evaluation.rollout.play_starts`).

Work runs on the env worker pool (:class:`~nemo_act.evaluation.pool.EnvPool`): one state per pool call,
every env call under ``env.call_timeout_s``; a worker that hangs or dies is replaced and the state is
replayed up to ``env.max_restarts`` times, then recorded as failed with the reason. Results are appended
per state (:class:`~nemo_act.data.io.ResumableJsonl`), so a killed build resumes where it stopped.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from tqdm.auto import tqdm

from nemo_act.benchmarks.base import DivergenceError, adapter_of, as_observation, restore
from nemo_act.config.schema import BenchmarkConfigBase, ExperimentConfig
from nemo_act.data.io import ResumableJsonl, read_jsonl
from nemo_act.data.records import Trajectory, _Record
from nemo_act.evaluation.env_pools import make_env_pool
from nemo_act.evaluation.env_worker import with_deadline
from nemo_act.evaluation.rollout import Start
from nemo_act.prompts.state import expert_action, state_id


def require_episodes(trajectories: Sequence[Trajectory], experts: str | Path, method: str) -> None:
    """Fail unless every expert trajectory names the env episode it was played in (a variation to reset to).

    Branching and roll-on restore a state by replaying the expert's prefix in that episode. WebShop's human
    demonstrations name none (the sessions were logged on the web shop, not in an env episode), so the
    reflection baselines there need experts from rollouts in the env.

    Raises:
        ValueError: Naming the file, how many trajectories lack an episode, one of them and the way out.
    """
    missing = [t.trajectory_id for t in trajectories if t.variation is None]
    if missing:
        raise ValueError(
            f"{experts}: {method} replays expert episodes in the env, but {len(missing)} of {len(trajectories)} "
            f"trajectories name no episode to reset to (e.g. {missing[0]}; human demonstrations logged outside an "
            "env name none). Take experts from rollouts in the env: pipeline.experts.path=FILE (trajectories in our "
            "schema; or nemo-act experts --from-rollouts FILE)"
        )


class Outcome(_Record):
    """What the env showed after one candidate action from a restored state."""

    action: str
    observation: str = Field(description="The env's observation right after the action.")
    score: float
    done: bool


class BranchRecord(_Record):
    """Every candidate's outcome at one expert state (one line of a branching file)."""

    state_id: str
    trajectory_id: str
    index: int = Field(description="Step index of the state in its trajectory.")
    status: Literal["ok", "failed"]
    reason: str | None = Field(default=None, description="Why the state failed (divergence, a lost env, an error).")
    outcomes: list[Outcome] = Field(default_factory=list)


class Brancher:
    """Restores states and executes candidates in one live env of a pool worker (built there: picklable).

    Args:
        cfg: The benchmark; its adapter's ``env_factory`` builds the env.
        call_timeout: Deadline of every env call (``env.call_timeout_s``).
    """

    def __init__(self, cfg: BenchmarkConfigBase, call_timeout: float | None) -> None:
        factory = adapter_of(cfg).env_factory(cfg, False)
        if factory is None:
            raise ValueError(f"benchmark '{cfg.name}' has no live env: its states cannot be branched")
        self._raw = factory()
        self.env = with_deadline(self._raw, call_timeout)

    def execute(self, trajectory_json: str, index: int, actions: list[str]) -> str:
        """Outcomes of ``actions`` at step ``index`` of a trajectory, as a :class:`BranchRecord` (JSON)."""
        traj = Trajectory.model_validate_json(trajectory_json)
        record = {"state_id": state_id(traj, index), "trajectory_id": traj.trajectory_id, "index": index}
        outcomes = []
        try:
            for action in actions:
                restore(self.env, traj, index)
                nxt = as_observation(self.env.step(action))
                outcomes.append(Outcome(action=action, observation=nxt.observation, score=nxt.score, done=nxt.done))
        except DivergenceError as err:
            return BranchRecord(**record, status="failed", reason=f"diverged: {err}").model_dump_json()
        return BranchRecord(**record, status="ok", outcomes=outcomes).model_dump_json()

    def close(self) -> None:
        """Close the env."""
        self._raw.close()


def branch_states(
    cfg: ExperimentConfig,
    requests: Sequence[tuple[Trajectory, int, list[str]]],
    out: str | Path,
    workers: int,
    progress: bool = True,
) -> list[BranchRecord]:
    """Execute candidate actions at expert states; append one record per state to ``out`` (resumable).

    Args:
        cfg: Experiment config (``benchmark``, ``env.call_timeout_s``, ``env.max_restarts``).
        requests: (trajectory, step index, candidate actions) per state.
        out: JSONL of :class:`BranchRecord` (``<out>.partial`` until every state is done).
        workers: Env worker processes.
        progress: Show a progress bar.

    Returns:
        Every state's record, in request order (those of an earlier, interrupted run included).

    Raises:
        ValueError: ``out`` is a finished file made for other states.
    """
    out = Path(out)
    by_id = {state_id(t, i): (t, i, a) for t, i, a in requests}
    if len(by_id) != len(requests):
        raise ValueError("branch_states: a state is requested twice")
    if out.exists():
        finished = {r.state_id: r for r in read_jsonl(out, BranchRecord)}
        missing = [sid for sid in by_id if sid not in finished]
        if missing:
            raise ValueError(f"{out}: finished, but lacks {len(missing)} requested states ({missing[0]}, ...)")
        return [finished[sid] for sid in by_id]
    log = ResumableJsonl(out, BranchRecord, key="state_id")
    done = log.done_keys
    todo = [sid for sid in by_id if sid not in done]
    bar = tqdm(total=len(by_id), initial=len(by_id) - len(todo), desc="branching", unit="state", disable=not progress)
    if todo:
        brancher = functools.partial(Brancher, cfg.benchmark, cfg.env.call_timeout_s)
        with bar, make_env_pool(cfg.env.pool, brancher, min(workers, len(todo)), 1) as pool:
            calls = ((sid, "execute", (by_id[sid][0].model_dump_json(), by_id[sid][1], by_id[sid][2])) for sid in todo)
            for sid, status, value in pool.imap(calls, cfg.env.max_restarts):
                traj, index, _ = by_id[sid]
                if status == "ok":
                    rec = BranchRecord.model_validate_json(value)
                else:  # the env raised, or its worker was lost more than env.max_restarts times
                    rec = BranchRecord(
                        state_id=sid, trajectory_id=traj.trajectory_id, index=index, status="failed", reason=value
                    )
                log.append([rec])
                bar.set_postfix(failed=sum(r.status == "failed" for r in log.records))
                bar.update(1)
    else:
        bar.close()
    log.finish()
    records: dict[str, Any] = {r.state_id: r for r in log.records}
    return [records[sid] for sid in by_id]


class BranchingEnv:
    """A benchmark's live env that can also begin an episode at a recorded state with a given action.

    Built in an env worker (picklable through :func:`functools.partial`); every method call there runs under
    ``env.call_timeout_s``, a :meth:`branch` call (the replay and the action) as one call.

    Args:
        cfg: The benchmark; its adapter's ``env_factory`` builds the env.
    """

    def __init__(self, cfg: BenchmarkConfigBase) -> None:
        factory = adapter_of(cfg).env_factory(cfg, False)
        if factory is None:
            raise ValueError(f"benchmark '{cfg.name}' has no live env: its states cannot be branched")
        self._env = factory()

    def reset(self, task: str, variation: int) -> Any:
        """A fresh episode (the env's own reset)."""
        return self._env.reset(task, variation)

    def step(self, action: str) -> Any:
        """One action (the env's own step)."""
        return self._env.step(action)

    def branch(self, trajectory_json: str, index: int, action: str) -> Any:
        """Restore step ``index`` of a trajectory, execute ``action``; the env's view after it.

        Returns:
            The observation after the action, or a string saying why the state could not be restored
            (the episode is then recorded as failed with it).
        """
        traj = Trajectory.model_validate_json(trajectory_json)
        try:
            restore(self._env, traj, index)
        except DivergenceError as err:
            return f"diverged: {err}"
        return self._env.step(action)

    def close(self) -> None:
        """Close the env."""
        self._env.close()


def roll_on_start(traj: Trajectory, index: int, action: str, key: str, max_steps: int | None) -> Start:
    """The :class:`~nemo_act.evaluation.rollout.Start` of an episode that branches at a state with ``action``.

    Args:
        traj: The expert trajectory.
        index: The state's step index.
        action: The first action from the restored state (a candidate).
        key: The episode's id.
        max_steps: Step budget from the episode's start (None: ``benchmark.max_steps``).
    """
    past = [(s.observation, expert_action(traj, i)) for i, s in enumerate(traj.steps[:index])]
    past.append((traj.steps[index].observation, action))
    first = {"prompt": None, "output": None, "action": action, "well_formed": True, "branched": True}
    return Start(
        key=key, task=traj.task_id, variation=int(traj.variation or 0),
        call=("branch", (traj.model_dump_json(), index, action)), past=tuple(past), first=(first,),
        max_steps=max_steps,
    )  # fmt: skip
