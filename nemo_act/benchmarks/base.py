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
  ``read_experts(cfg, split) -> (list[Trajectory], params)`` (experts read from files; ``params`` go into the
  experts' manifest, but for ``counts``, ``skipped`` (bad lines left out, by reason) and ``shown_as`` (how
  messages name the source));
* ``LIVE_EXPERT_ACTION``: whether its live env proposes the expert's next action itself (ALFWorld);
* optionally ``expert_summary(counts) -> list[str]``: lines ``nemo-act experts`` prints about its own counts;
* optionally ``expert_warnings(counts) -> list[str]``: what is wrong with the data, each with the setting that fixes it
  (``nemo-act experts``, ``run`` and ``pairs`` print them: :func:`nemo_act.steps.experts.data_warnings`);
* optionally ``plays_live(cfg) -> bool``: for a module with both kinds of expert data, which one a config uses;
* optionally ``add_commands(sub)``: CLI subcommands the benchmark offers (``sub`` is ``nemo-act``'s
  ``argparse`` subparsers; each parser sets ``func(args) -> exit code``), e.g. a setup step its data needs;
* optionally ``PAPER_COLUMNS``: the paper-table columns its evaluations fill, each a dict of ``key``, ``label``,
  ``split``, ``metric`` (``score`` or ``completion``), ``order`` (place among all benchmarks' columns) and
  optionally ``protocol`` (config values an evaluation must have had to count).

:class:`BenchmarkAdapter`, :class:`LiveExperts`, :class:`FileExperts` and :class:`BenchmarkEnv` type these
(``typing.Protocol``); :func:`adapter` checks a module against them when it is first named and says what is
missing. Whether experts are played live is derived (:func:`plays_experts`), never configured.

The config schema, expert collection, evaluation, the report and the CLI read this registry
(:func:`registered`: the ``benchmark/*.yaml`` of the config search path); none of them names a benchmark
(``tests/test_architecture.py`` checks). ``docs/extending.md`` walks through adding one.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from omegaconf import OmegaConf
from pydantic import BaseModel, ConfigDict

from nemo_act.config.load import find_conf, group_options

if TYPE_CHECKING:
    from nemo_act.config.schema import BenchmarkConfigBase
    from nemo_act.data.records import Trajectory


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


class BenchmarkEnv(Protocol):
    """One live env (what ``env_factory``'s callable and ``expert_env`` return)."""

    def reset(self, task: str, variation: int) -> Observation | dict[str, Any]:
        """Start an episode: its first observation."""

    def step(self, action: str) -> Observation | dict[str, Any]:
        """Take an action: what the env shows next."""

    def close(self) -> None:
        """Free the env's resources (a JVM, a game)."""


class BenchmarkAdapter(Protocol):
    """What every benchmark module provides (module attributes and functions)."""

    CONFIG: type[BenchmarkConfigBase]
    ADAPTER_VERSION: int
    LIVE_EXPERT_ACTION: bool

    def episodes(
        self, cfg: BenchmarkConfigBase, split: str, tasks: list[str] | None, max_variations: int | None
    ) -> list[tuple[str, int]]:
        """A split's (task, variation) episodes."""

    def env_factory(self, cfg: BenchmarkConfigBase, expert: bool) -> Callable[[], BenchmarkEnv] | None:
        """A picklable callable building one live env in a worker; None without a simulator."""


class LiveExperts(Protocol):
    """Experts played in the live env, in an env worker."""

    def expert_env(self, cfg: BenchmarkConfigBase) -> BenchmarkEnv:
        """The env expert episodes are played in."""

    def play_expert(
        self, env: BenchmarkEnv, cfg: BenchmarkConfigBase, task: str, variation: int, split: str
    ) -> tuple[Trajectory, dict[str, Any] | None, int]:
        """One expert episode: (trajectory, counts for the manifest or None, attempts)."""


class FileExperts(Protocol):
    """Experts read from files."""

    def read_experts(self, cfg: BenchmarkConfigBase, split: str) -> tuple[list[Trajectory], dict[str, Any]]:
        """A split's expert trajectories and what the manifest records of their source."""


def _members(proto: type) -> dict[str, Any]:
    """A protocol's members: name -> its function, or None for a plain attribute."""
    out: dict[str, Any] = dict.fromkeys(getattr(proto, "__annotations__", {}))
    out |= {n: f for n, f in vars(proto).items() if inspect.isfunction(f) and not n.startswith("_")}
    return out


def _problems(mod: ModuleType, proto: type) -> list[str]:
    """What ``mod`` lacks of ``proto``, or has with a call that does not fit."""
    out = []
    for name, fn in _members(proto).items():
        got = getattr(mod, name, None)
        if got is None:
            out.append(f"{name} (missing)")
            continue
        if fn is None:
            continue
        params = list(inspect.signature(fn).parameters)[1:]  # a module function has no self
        try:
            inspect.signature(got).bind(*params)
        except TypeError:
            out.append(f"{name} (must take {len(params)} arguments: {', '.join(params)})")
        except ValueError:  # no signature to read (a builtin): trust it
            pass
    return out


def check_env(env: Any, where: str) -> Any:
    """``env`` if it has :class:`BenchmarkEnv`'s methods, else a TypeError naming ``where`` and what is missing."""
    missing = [n for n in _members(BenchmarkEnv) if not callable(getattr(env, n, None))]
    if missing:
        raise TypeError(f"{where}: the env {type(env).__name__} lacks {', '.join(missing)} (BenchmarkEnv)")
    return env


def plays_experts(cfg: Any) -> bool:
    """Whether a benchmark's experts are played in its live env (``play_expert``), not read from files.

    The rule is the config's own derived ``live_experts`` (:class:`~nemo_act.config.schema.BenchmarkConfigBase`:
    an adapter with both ways says which one a config takes with ``plays_live(cfg)``, WebShop: its protocol); here
    the adapter is checked against the protocol first.
    """
    adapter_of(cfg)
    return bool(cfg.live_experts)


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
    missing = _problems(mod, BenchmarkAdapter)
    live, files = _problems(mod, LiveExperts), _problems(mod, FileExperts)
    if live and files:
        missing.append(f"expert data: LiveExperts ({', '.join(live)}) or FileExperts ({', '.join(files)})")
    if missing:
        raise ValueError(
            f"benchmark adapter '{module}' ({getattr(mod, '__file__', '?')}) lacks or mistypes: "
            f"{'; '.join(missing)} (the protocols in nemo_act/benchmarks/base.py)"
        )
    return mod


def adapter_of(cfg: Any) -> ModuleType:
    """The adapter module of a benchmark config."""
    return adapter(cfg.adapter)


def registered() -> list[tuple[str, str, str]]:
    """Every benchmark of the config search path: (name, title, adapter module) of each ``benchmark/<name>.yaml``."""
    out = []
    for name in group_options("benchmark"):
        raw = OmegaConf.load(find_conf(f"benchmark/{name}.yaml"))
        out.append((name, str(raw.get("title", "")), str(raw.get("adapter", ""))))
    return out


def usable_adapters() -> list[tuple[str, ModuleType]]:
    """(name, adapter module) of every :func:`registered` benchmark whose adapter imports and fits the protocol.

    For what the CLI and the report take from all adapters at once (subcommands, paper columns): a broken one is
    left out here and named with what is wrong when a config uses it (:func:`adapter`).
    """
    out = []
    for name, _, ref in registered():
        try:
            out.append((name, adapter(ref)))
        except ValueError:
            continue
    return out
