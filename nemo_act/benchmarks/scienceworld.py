"""ScienceWorld adapter: episodes of a split, gold-trajectory experts, and the valid-action alias map.

Episodes: every (task, variation) of the official ``train``/``dev``/``test`` variations, at most
``max_variations`` per task (test with 5 = the protocol's 149 episodes).

Experts take the official gold action sequence (``load(..., generateGoldPath=True)``), replay it in a
plain load of the same episode (what a policy plays: a gold-path load simulates differently) and
record, before each action, the observation and the env's full valid-action list. Every episode runs
in a fresh JVM (``fresh_env_per_episode``), because the simulator's outcomes depend on what the JVM
ran before (a few tasks, e.g. grow-fruit, stay random in the simulator itself). Every JVM starts with
``jvm_options`` (default: a constant identity hash, ``-XX:hashCode=2``): the simulator keeps objects in hash sets
that use Java's identity hash, so the order a room lists its objects in, and the choices of the gold agent, follow
the identity hashes, which HotSpot draws per thread as threads are made, a matter of timing. With a constant hash
that order is the order the program made the objects in: the same in every fresh JVM, whatever its JIT and GC
options or the load on the machine (:class:`Simulator` says what was measured). Gold
actions are spelled more fully than the valid list spells them ("focus on thermometer in inventory"
vs "focus on thermometer"), so each gold action not in the list verbatim goes through
:func:`find_alias`. Under the ``easy`` simplification the gold path still opens doors that are
already open; the env answers "The door is already open." but the step still advances the
simulation clock (plants grow, substances heat), so such steps are recorded as they are, with
``action_admissible`` false, and counted apart. All of this is counted in the experts manifest.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_act.benchmarks.base import Observation
from nemo_act.benchmarks.jvm import jvm_options
from nemo_act.config.schema import BenchmarkConfigBase
from nemo_act.data.records import Step, Trajectory
from nemo_act.rewards import normalize_action

SPLITS = ("train", "dev", "test")
# Bump when replay or alias logic changes what an experts file holds: finished files made by an
# older adapter are then not reused (the number is part of the experts manifest's parameters).
ADAPTER_VERSION = 4
PAPER_COLUMNS = (  # the paper's column: the test split's mean score
    {"key": "scienceworld", "label": "ScienceWorld score", "split": "test", "metric": "score", "order": 3},
)


class ScienceWorldConfig(BenchmarkConfigBase):
    """ScienceWorld (pip package `scienceworld`, runs on Java)."""

    name: Literal["scienceworld"]
    simplification: str = Field(description="ScienceWorld simplification string, e.g. 'easy' or ''.")
    env_step_limit: int = Field(gt=0, description="Env-side step limit; large so long gold paths finish.")
    max_variations: int | None = Field(description="Variations per task kept (test protocol: 5).")
    fresh_env_per_episode: bool = Field(
        description="Start every episode in a fresh JVM: outcomes then do not depend on earlier episodes."
    )
    jvm_options: list[str] = Field(
        description="Options of every ScienceWorld JVM (after JAVA_TOOL_OPTIONS, so these win). The default, a "
        "constant identity hash, makes observations and gold paths a function of (task, variation); [] = HotSpot's "
        "defaults, under which they follow thread timing (docs/benchmarks.md)."
    )

    @model_validator(mode="before")
    @classmethod
    def _old_run_configs(cls, value: Any) -> Any:
        """A run's config written before 2026-12-04 has no ``jvm_options``: its JVMs ran with HotSpot's defaults."""
        if isinstance(value, dict) and "jvm_options" not in value:
            value = {**value, "jvm_options": []}
        return value


SOURCE = "scienceworld-gold"
# Env answers that mean the action changed nothing but the clock (gold steps the easy simplification made moot).
NOOP_OBSERVATIONS = ("The door is already open.",)
_FILLER = frozenset({"in", "on", "the", "a", "an", "inventory"})


class Simulator:
    """A ScienceWorld env (one JVM) that can start each episode in a fresh JVM.

    Measured here: ScienceWorld's outcomes depend on what the JVM ran before. In a JVM that already
    played other episodes, ``power-component`` variation 15 got a 6-step gold path (a fresh JVM gives
    9 steps), and the same recorded actions scored 77, 77, 100 in three replays in one JVM while
    every fresh-JVM replay gave the same score. With ``fresh_env_per_episode`` each
    :meth:`episode` restarts the JVM (about 1 s), so an episode no longer depends on earlier ones. A few
    tasks are random in the simulator itself (grow-fruit 94's recorded actions replayed to 100, 100,
    100, 50 in fresh JVMs). Those runs used HotSpot's default identity hash. With the constant one (``jvm_options``'
    default) fresh JVMs give the same trajectories byte for byte whatever the JIT and GC options, the workers or the
    load (measured on the demo's 36 expert episodes, 2026-12-04: 1 or 2 workers, two runs of ``make demo``), where
    the default hash gave ``chemistry-mix-paint-secondary-color`` 18 a 16-step gold path under HotSpot's defaults
    and an 8-step one under the tests' options. A JVM with history still differs: the same variation 4 took 20 steps
    after the other 19 training episodes in one JVM, 12 in a fresh one; so ``fresh_env_per_episode`` stays on.
    Other attributes (``reset``, ``step``, ``get_*``) are the current env's.
    """

    def __init__(self, cfg: ScienceWorldConfig) -> None:
        self.cfg = cfg
        self._env = self._start()

    def _start(self):
        from scienceworld import ScienceWorldEnv

        with jvm_options("scienceworld.scienceworld", self.cfg.jvm_options):
            return ScienceWorldEnv("", envStepLimit=self.cfg.env_step_limit)

    def episode(self, task: str, variation: int, gold_path: bool = False) -> None:
        """Load an episode (in a fresh JVM when the config says so); call ``reset`` next."""
        if self.cfg.fresh_env_per_episode:
            self._env.close()
            self._env = self._start()
        self._env.load(task, variation, simplificationStr=self.cfg.simplification, generateGoldPath=gold_path)

    def __getattr__(self, name: str):
        return getattr(self._env, name)

    def close(self) -> None:
        """Stop the JVM."""
        self._env.close()


def make_env(cfg: ScienceWorldConfig) -> Simulator:
    """Start a ScienceWorld env (one JVM)."""
    return Simulator(cfg)


def list_episodes(
    env, split: str, max_variations: int | None, tasks: Sequence[str] | None = None, simplification: str = ""
) -> list[tuple[str, int]]:
    """List (task, variation) pairs of a split.

    Args:
        env: A ScienceWorld env.
        split: ``train``, ``dev`` or ``test``.
        max_variations: Keep at most this many variations per task (the first ones), None = all.
        tasks: Task names to keep (all 30 when None).
        simplification: Simplification string the episodes are loaded with.

    Returns:
        Episodes in task order, then variation order.

    Raises:
        ValueError: Unknown split or task name.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown ScienceWorld split '{split}'; choose one of {', '.join(SPLITS)}")
    names = list(env.get_task_names())
    if tasks:
        unknown = [t for t in tasks if t not in names]
        if unknown:
            raise ValueError(f"unknown ScienceWorld task(s) {unknown}; tasks are: {', '.join(names)}")
        names = [t for t in names if t in tasks]
    out = []
    for task in names:
        env.load(task, 0, simplificationStr=simplification)
        variations = {
            "train": env.get_variations_train,
            "dev": env.get_variations_dev,
            "test": env.get_variations_test,
        }[split]()
        variations = sorted(variations)
        if max_variations is not None:
            variations = variations[:max_variations]
        out += [(task, v) for v in variations]
    return out


@cache
def _template_regex(template: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in template.split("OBJ")]
    return re.compile("^" + "(.+?)".join(parts[:-1]) + ("(.+)" if len(parts) > 1 else "") + parts[-1] + "$")


def _parse(action: str, templates: Sequence[str]) -> tuple[str, list[set[str]], list[set[str]]] | None:
    """Match an action to its template.

    Returns:
        The template, each argument's content words, and each argument's head words (the words
        before its first " in ", i.e. the object itself without where it is, single letters dropped).
    """
    for template in sorted(templates, key=len, reverse=True):
        m = _template_regex(template).match(action)
        if m:
            words = [set(g.split()) - _FILLER for g in m.groups()]
            heads = [{w for w in g.split(" in ")[0].split() if len(w) > 1} - _FILLER for g in m.groups()]
            return template, words, heads
    return None


def find_alias(action: str, valid: Sequence[str], templates: Sequence[str]) -> str | None:
    """Find the valid-list spelling of a gold action the list does not hold verbatim.

    The gold action and a valid action are the same action when they use the same template (e.g.
    ``use OBJ on OBJ``) and each argument of the valid action names a subset of the words of the
    gold argument (location qualifiers such as "in inventory" and letter suffixes such as "B" are
    what the list leaves out) that still contains the gold argument's head, the object before its
    first " in " ("lemon tree" in "lemon tree in the adult stage in flower pot 5", so the pot alone
    never stands for the tree), and whose own head shares a word with it (so "flower in orange tree
    in the reproducing stage", a part of the tree, never stands for the tree). The valid action with
    the most shared words wins; a tie means no alias.

    Args:
        action: The gold action.
        valid: The env's valid actions at that step.
        templates: The env's action templates (``get_possible_actions()``).

    Returns:
        The alias, or None when no unique match exists.
    """
    norm = normalize_action(action)
    for v in valid:
        if normalize_action(v) == norm:
            return v
    gold = _parse(action, templates)
    if gold is None or not any(gold[1]):
        return None
    best: list[tuple[int, str]] = []
    for v in valid:
        cand = _parse(v, templates)
        if cand is None or cand[0] != gold[0]:
            continue
        same_object = all(
            c and c <= g and h <= c and (not h or ch & h)
            for c, g, h, ch in zip(cand[1], gold[1], gold[2], cand[2], strict=True)
        )
        if same_object:
            best.append((sum(len(c) for c in cand[1]), v))
    if not best:
        return None
    best.sort(reverse=True)
    if len(best) > 1 and best[0][0] == best[1][0]:
        return None
    return best[0][1]


class GoldStats(BaseModel):
    """How the replayed gold actions matched the env's valid list (experts manifest, README)."""

    model_config = ConfigDict(extra="forbid")

    gold_actions: int = 0
    gold_verbatim_in_valid: int = 0
    gold_aliased_to_valid: int = 0
    gold_noop_kept: int = 0
    gold_not_in_valid_kept: int = 0
    examples_not_in_valid: list[str] = Field(default_factory=list)

    def __add__(self, other: GoldStats) -> GoldStats:
        return GoldStats(
            gold_actions=self.gold_actions + other.gold_actions,
            gold_verbatim_in_valid=self.gold_verbatim_in_valid + other.gold_verbatim_in_valid,
            gold_aliased_to_valid=self.gold_aliased_to_valid + other.gold_aliased_to_valid,
            gold_noop_kept=self.gold_noop_kept + other.gold_noop_kept,
            gold_not_in_valid_kept=self.gold_not_in_valid_kept + other.gold_not_in_valid_kept,
            examples_not_in_valid=(self.examples_not_in_valid + other.examples_not_in_valid)[:20],
        )


def replay_gold(env: Simulator, task: str, variation: int, split: str) -> tuple[Trajectory, GoldStats]:
    """Replay one episode's gold action sequence and record it.

    Args:
        env: A ScienceWorld env.
        task: Task name.
        variation: Variation index.
        split: Split the variation belongs to (recorded).

    Returns:
        The trajectory (``success`` = final score 100) and its gold-action counts.
    """
    env.episode(task, variation, gold_path=True)
    env.reset()
    gold = list(env.get_gold_action_sequence())
    # Loading with the gold path changes the simulation itself (measured: power-component 15 wins after
    # 6 gold actions there, while in a plain load, which is what a policy plays, it needs 2 more): the
    # actions are taken from that load and recorded in a plain one.
    env.episode(task, variation)
    obs, info = env.reset()
    templates = list(env.get_possible_actions())
    task_description = env.get_task_description()
    stats = GoldStats()
    steps: list[Step] = []
    for action in gold:
        valid = list(info["valid"])
        stats.gold_actions += 1
        verbatim = action in valid
        alias = None if verbatim else find_alias(action, valid, templates)
        next_obs, _reward, done, info = env.step(action)
        if verbatim:
            stats.gold_verbatim_in_valid += 1
        elif alias is not None:
            stats.gold_aliased_to_valid += 1
        elif next_obs.strip() in NOOP_OBSERVATIONS:
            stats.gold_noop_kept += 1  # recorded: it still advances the simulation clock
        else:
            stats.gold_not_in_valid_kept += 1
            stats.examples_not_in_valid.append(action)
        steps.append(
            Step(
                observation=obs,
                action=action,
                admissible_actions=valid,
                action_admissible=verbatim or alias is not None,
                admissible_alias=alias if alias != action else None,
                score=float(info["score"]),
            )
        )
        obs = next_obs
        if done:
            break
    final = float(info["score"])  # ScienceWorld gives -100 for a failed task
    traj = Trajectory(
        trajectory_id=f"scienceworld/{task}/{variation}",
        benchmark="scienceworld",
        task_id=task,
        variation=variation,
        split=split,
        task_description=task_description,
        steps=steps,
        score=final,
        success=final >= 100,
        source=SOURCE,
    )
    return traj, stats


def replay_actions(env: Simulator, traj: Trajectory, use_alias: bool = True) -> float:
    """Replay a recorded trajectory's actions in a fresh episode and return the final score.

    Args:
        env: A ScienceWorld env.
        traj: A ScienceWorld trajectory.
        use_alias: Send the valid-list spelling (what a policy trained on the prompts emits).

    Returns:
        The env's score after the last action.
    """
    env.episode(traj.task_id, traj.variation)
    env.reset()
    score = 0.0
    for step in traj.steps:
        action = (step.admissible_alias or step.action) if use_alias else step.action
        _obs, _r, done, info = env.step(action)
        score = float(info["score"])
        if done:
            break
    return score


class EpisodeEnv:
    """One ScienceWorld env (one JVM) that plays evaluation episodes step by step.

    ``reset`` and ``step`` return :class:`~nemo_act.benchmarks.base.Observation` (``admissible``: the full
    valid list).
    """

    def __init__(self, cfg: ScienceWorldConfig) -> None:
        self.cfg = cfg
        self.env = make_env(cfg)
        self.task_description = ""

    def reset(self, task: str, variation: int) -> Observation:
        """Start an episode."""
        self.env.episode(task, variation)
        obs, info = self.env.reset()
        self.task_description = self.env.get_task_description()
        return self._view(obs, info, done=False)

    def step(self, action: str) -> Observation:
        """Take one action (an empty or unknown action is the env's to answer)."""
        obs, _reward, done, info = self.env.step(action)
        return self._view(obs, info, done=bool(done))

    def _view(self, obs: str, info: dict, done: bool) -> Observation:
        return Observation(
            observation=obs,
            task_description=self.task_description,
            admissible=list(info["valid"]),
            score=float(info["score"]),
            done=done,
        )

    def close(self) -> None:
        """Stop the JVM."""
        self.env.close()


# ---- the benchmark protocol (nemo_act/benchmarks/base.py) ------------------------------------------------------
CONFIG = ScienceWorldConfig
LIVE_EXPERT_ACTION = False  # gold actions come from expert files (or replay_gold), not from the env while playing


def episodes(
    cfg: ScienceWorldConfig, split: str, tasks: Sequence[str] | None, max_variations: int | None
) -> list[tuple[str, int]]:
    """Official variations of a split, at most ``max_variations`` (default ``cfg.max_variations``) per task."""
    env = make_env(cfg)
    try:
        mv = cfg.max_variations if max_variations is None else max_variations
        return list_episodes(env, split, mv, tasks, cfg.simplification)
    finally:
        env.close()


def env_factory(cfg: ScienceWorldConfig, expert: bool) -> Callable[[], EpisodeEnv]:
    """Builds one evaluation env (one JVM) in a pool worker."""
    return functools.partial(EpisodeEnv, cfg)


def expert_env(cfg: ScienceWorldConfig) -> Simulator:
    """The env an expert player replays gold action sequences in."""
    return make_env(cfg)


def play_expert(
    env: Simulator, cfg: ScienceWorldConfig, task: str, variation: int, split: str
) -> tuple[Trajectory, dict[str, int], int]:
    """Replay one episode's gold sequence: (trajectory, how gold actions matched the valid list, 1 attempt)."""
    traj, stats = replay_gold(env, task, variation, split)
    return traj, stats.model_dump(), 1


def expert_summary(counts: dict[str, Any]) -> list[str]:
    """What ``nemo-act experts`` prints of ScienceWorld's own counts: how gold actions met the valid list."""
    if "gold_actions" not in counts:
        return []
    return [
        f"gold actions: {counts['gold_actions']}, verbatim in valid list {counts['gold_verbatim_in_valid']}, "
        f"aliased {counts['gold_aliased_to_valid']}, no-op door openings kept {counts['gold_noop_kept']}, "
        f"kept though not listed {counts['gold_not_in_valid_kept']}"
    ]
