"""The benchmark protocol and its registry: what the core asks of a benchmark, and how it finds one.

A benchmark is one module plus one ``conf/benchmark/<name>.yaml`` whose ``adapter`` key names the module
(``nemo_act.benchmarks.scienceworld``, or a user's own ``mypkg.mybench``). The module provides:

* ``CONFIG``: its config class, a subclass of :class:`~nemo_act.config.schema.BenchmarkConfigBase`
  (the YAML is validated against it; ``name`` must match);
* ``ADAPTER_VERSION``: bumped when what it records changes (finished expert files are then remade);
* ``episodes(cfg, split, tasks, max_variations) -> list[(task, variation)]``: a split's episodes;
* ``env_factory(cfg, expert) -> Callable[[], env] | None``: builds one live env (``reset(task, variation)``,
  ``step(action)``, ``close()``, returning :class:`Observation`), None when there is no simulator;
* expert data, one of: ``expert_env(cfg)`` + ``play_expert(env, cfg, task, variation, split)`` returning
  ``(Trajectory, counts | None, attempts)`` (experts played live in a pool worker), or
  ``read_experts(cfg, split) -> (list[Trajectory], params)`` (experts read from files);
* ``LIVE_EXPERT_ACTION``: whether its live env proposes the expert's next action itself (ALFWorld).

The config schema, expert collection, evaluation, the report and the CLI read this registry; none of
them names a benchmark. ``docs/extending.md`` walks through adding one.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict


class Observation(BaseModel):
    """What a live env shows after ``reset`` or ``step`` (it crosses process boundaries: plain fields)."""

    model_config = ConfigDict(extra="forbid")

    observation: str
    task_description: str
    admissible: list[str]
    score: float
    done: bool
    expert_action: str | None = None  # the env's own expert's next action, where it has one (ALFWorld)


def as_observation(view: Observation | dict[str, Any]) -> Observation:
    """An env's answer as an :class:`Observation` (an env may also answer with a dict of the same keys)."""
    return view if isinstance(view, Observation) else Observation.model_validate(view)


class DivergenceError(RuntimeError):
    """A live env did not reach a recorded state when its action prefix was replayed."""


def _lines(text: str) -> list[str]:
    """An observation's lines, whitespace-normalised and sorted.

    ScienceWorld lists a room's objects one per line in an order that varies between JVMs (measured: two
    paint cups swapped in a clean-clone run), which is no divergence.
    """
    return sorted(" ".join(line.split()) for line in text.splitlines() if line.strip())


def restore(env: Any, trajectory: Any, index: int) -> Observation:
    """Bring a live env to the state before step ``index`` of a recorded trajectory by replaying its actions.

    Every observation on the way is compared with the recorded one (its lines, whitespace-normalised, in any
    order: see :func:`_lines`), so an env
    that has drifted (another version, other game files, a JVM with history) is caught where it diverges.

    Args:
        env: A live env of the trajectory's benchmark (``reset(task, variation)``, ``step(action)``).
        trajectory: The recorded :class:`~nemo_act.data.records.Trajectory`.
        index: The step whose state to restore (0 = right after reset).

    Returns:
        The env's observation at that state (equal to ``trajectory.steps[index].observation``).

    Raises:
        DivergenceError: Naming the trajectory, how many actions were replayed and both texts.
    """
    if not 0 <= index < len(trajectory.steps):
        raise IndexError(f"{trajectory.trajectory_id} has {len(trajectory.steps)} steps; no step {index}")
    obs = as_observation(env.reset(trajectory.task_id, trajectory.variation or 0))
    for i in range(index + 1):
        expected = trajectory.steps[i].observation
        if _lines(obs.observation) != _lines(expected):
            raise DivergenceError(
                f"{trajectory.trajectory_id}: after {i} replayed action(s) the env shows {obs.observation[:300]!r}, "
                f"the record {expected[:300]!r}"
            )
        if i == index:
            break
        obs = as_observation(env.step(trajectory.steps[i].action))
    return obs


@cache
def adapter(module: str) -> ModuleType:
    """The adapter module named by a benchmark config's ``adapter`` key (imported once).

    Raises:
        ValueError: It cannot be imported or lacks what the protocol needs.
    """
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"benchmark adapter '{module}' cannot be imported: {err}") from None
    missing = [n for n in ("CONFIG", "ADAPTER_VERSION", "episodes", "env_factory") if not hasattr(mod, n)]
    if not (hasattr(mod, "play_expert") and hasattr(mod, "expert_env")) and not hasattr(mod, "read_experts"):
        missing.append("play_expert + expert_env, or read_experts")
    if missing:
        raise ValueError(f"benchmark adapter '{module}' lacks {', '.join(missing)} (see nemo_act/benchmarks/base.py)")
    return mod


def benchmark_config(value: Any) -> Any:
    """Validate a ``benchmark`` config block against its adapter's ``CONFIG`` class (schema hook)."""
    if not isinstance(value, dict):
        return value  # already a config object
    module = value.get("adapter")
    if not module:
        raise ValueError("benchmark.adapter is not set: name the module that implements the benchmark")
    cls = adapter(module).CONFIG
    return cls.model_validate(value)


def adapter_of(cfg: Any) -> ModuleType:
    """The adapter module of a benchmark config."""
    return adapter(cfg.adapter)
