"""TextWorld-Express adapter: eight generated text games, gold experts played live, seeds of a fold as episodes.

TextWorld-Express (pip package ``textworld-express``, a JVM through py4j, like ScienceWorld) generates each game from
a seed, with parameters per game (rooms, doors, distractor items, ...), and keeps separate seed folds: ``train``
(seeds 0-999), ``dev`` (10000-10999) and ``test`` (20000-20999) in 1.1.0, the same ranges for every game. It lists
the valid actions at every step and gives a gold action sequence for any seed (``generateGoldPath``).

* **Tasks** are the configured games: ``benchmark.games`` is a list of ``{game, params}``, and a task's name is the
  game with its parameters (``coin:includeDoors=0,numLocations=4``; the game alone where it has none), so several
  settings of one game are several tasks. A list of tasks (``pipeline.experts.tasks``, ...) may name a game alone
  where ``benchmark.games`` holds one setting of it. A parameter the game does not know is refused when the episodes
  are listed, naming the entry.
* **Episodes** of a split are seeds of the fold of the same name (``variation`` = seed), the first
  ``max_variations`` of each task. A game is a function of its seed (measured: the same seed in the ``train`` and
  the ``test`` fold gives the same game), and the folds' seed ranges do not overlap, so a test-fold episode is never
  a training or tuning one.
* **Experts** take the gold sequence from a gold-path load and play it in a plain load (what a policy plays),
  recording before each action the observation and the valid actions. An expert counts only when the game is won
  (``tasksuccess``) with full score; a gold path that does not finish is a counted failure in the experts manifest,
  never an expert. Gold actions missing from the valid list are counted too.
* **Gold paths are random walks on some games.** In 1.1.0 the gold path of a search game (``coin``) is drawn from a
  generator the Python API does not seed: the same seed gave paths of 3 to 19 steps in one JVM, different from one
  process to the next whatever the JVM options (measured: train seeds 0-9, 8 draws each; ``mapreader`` drew one path
  per seed). With ``erase_loops`` (default) the path is played once and every stretch that comes back to a state
  already on it (the same observation and score) is cut, which leaves the walk's loop-free route: the same
  route for every draw (40 coin seeds x 6 draws: one route each) and the shortest one the draws found. The cut path is
  then played and checked like any gold path.
* **Scores**: the env's score is already normalised to [0, 1]; the core's scale is 0-100 (the protocol's, as
  ScienceWorld's), so a step's score is 100 x that, and success is a won game.
* Every JVM starts with ``jvm_options`` (default: a constant identity hash, as ScienceWorld's:
  :mod:`nemo_act.benchmarks.jvm`), and ``java`` missing from PATH is one line before any JVM is tried.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_act.benchmarks.base import Observation
from nemo_act.benchmarks.jvm import jvm_options
from nemo_act.config.schema import BenchmarkConfigBase
from nemo_act.data.records import Step, Trajectory

FOLDS = ("train", "dev", "test")
SOURCE = "textworld-express-gold"
# Bump when what an experts file holds changes: finished files made by an older adapter are then remade.
ADAPTER_VERSION = 2  # 2: gold paths with their loops cut (erase_loops)
LIVE_EXPERT_ACTION = False  # gold actions come from the gold-path load, not from the env while a policy plays


class GameSetting(BaseModel):
    """One game and its generation parameters (TextWorld-Express's ``gameParams``)."""

    model_config = ConfigDict(extra="forbid")

    game: str = Field(description="A TextWorld-Express game: cookingworld, twc, coin, mapreader, arithmetic, ...")
    params: dict[str, int] = Field(description="The game's parameters, e.g. {numLocations: 4, includeDoors: 0}.")

    @property
    def task(self) -> str:
        """The task's name: the game and its parameters in name order."""
        return f"{self.game}:{self.param_string}" if self.params else self.game

    @property
    def param_string(self) -> str:
        """The parameters as TextWorld-Express reads them (``numLocations=4,includeDoors=0``)."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))


class TextWorldExpressConfig(BenchmarkConfigBase):
    """TextWorld-Express (pip package ``textworld-express``, runs on Java)."""

    name: Literal["textworld_express"]
    games: list[GameSetting] = Field(min_length=1, description="The games played; a game with its params is a task.")
    env_step_limit: int = Field(gt=0, description="Env-side step limit (the evaluation cap is max_steps).")
    max_variations: int | None = Field(description="Seeds per task and split kept (the fold's first ones).")
    jvm_options: list[str] = Field(description="Options of every TextWorld-Express JVM (benchmarks/jvm.py).")
    erase_loops: bool = Field(
        description="Cut every stretch of a gold path that returns to a state already on it (the env draws some "
        "games' gold paths as random walks: the cut path is a function of the seed)."
    )


CONFIG = TextWorldExpressConfig


def _setting(cfg: TextWorldExpressConfig, task: str) -> GameSetting:
    for setting in cfg.games:
        if setting.task == task:
            return setting
    raise ValueError(f"unknown TextWorld-Express task '{task}'; the config's are: {', '.join(_tasks(cfg))}")


def _tasks(cfg: TextWorldExpressConfig) -> list[str]:
    return [s.task for s in cfg.games]


def resolve_tasks(cfg: TextWorldExpressConfig, tasks: Sequence[str]) -> list[str]:
    """The configured task each name stands for: a task's full name, or a game with one setting in the config.

    Raises:
        ValueError: A name that is no configured task nor a game with exactly one setting (naming the tasks).
    """
    out = []
    for name in tasks:
        found = [s.task for s in cfg.games if name in (s.task, s.game)]
        if len(found) != 1:
            why = f"game '{name}' has {len(found)} settings: name one" if found else f"unknown task '{name}'"
            raise ValueError(f"TextWorld-Express: {why}; the config's tasks are: {', '.join(_tasks(cfg))}")
        out += found
    return out


class Simulator:
    """One TextWorld-Express env (one JVM) with the config's JVM options; other attributes are the env's own."""

    def __init__(self, cfg: TextWorldExpressConfig) -> None:
        if shutil.which("java") is None:
            raise RuntimeError("TextWorld-Express runs on Java: no 'java' on PATH (install Java 17, e.g. a JRE)")
        from textworld_express import TextWorldExpressEnv

        self.cfg = cfg
        with jvm_options("textworld_express.textworld_express", cfg.jvm_options):
            self._env = TextWorldExpressEnv(envStepLimit=cfg.env_step_limit)
        self._loaded: str | None = None  # the task of the game loaded now
        self._folds: dict[str, dict[int, str]] = {}  # task -> seed -> fold, read once per task

    def load(self, setting: GameSetting, where: str) -> None:
        """Load a game (its fold seeds read once); a parameter it does not know is a ValueError naming ``where``."""
        if self._loaded == setting.task:
            return
        if setting.game not in self._env.getGameNames():
            raise ValueError(f"{where}: unknown game '{setting.game}'; TextWorld-Express has "
                             f"{', '.join(self._env.getGameNames())}")  # fmt: skip
        try:
            self._env.load(setting.game, setting.param_string)
        except ValueError as err:  # "Unrecognized property name (...). Known properties: ..."
            raise ValueError(f"{where} ({setting.task}): {' '.join(str(err).split())}") from None
        self._loaded = setting.task
        if setting.task not in self._folds:
            self._folds[setting.task] = {s: fold for fold in FOLDS for s in self.seeds(fold)}

    def seeds(self, fold: str) -> list[int]:
        """The loaded game's seeds of a fold, in order."""
        get = {"train": self._env.getValidSeedsTrain, "dev": self._env.getValidSeedsDev,
               "test": self._env.getValidSeedsTest}[fold]  # fmt: skip
        return sorted(int(s) for s in get())

    def start(self, setting: GameSetting, seed: int, gold_path: bool = False) -> tuple[str, dict[str, Any]]:
        """Start the game of ``seed`` (its fold's): the first observation and the env's infos."""
        self.load(setting, "benchmark.games")
        folds = self._folds[setting.task]
        if seed not in folds:
            raise ValueError(f"{setting.task}: seed {seed} is in no fold of TextWorld-Express")
        # no game name or params: the env resets the game loaded above instead of loading it again (its reset())
        return self._env.reset(seed=seed, gameFold=folds[seed], generateGoldPath=gold_path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def close(self) -> None:
        """Stop the JVM (once: the env's own ``__del__`` would close it again, into a closed pipe)."""
        self._env.close()
        self._env.close = lambda: None


def episodes(
    cfg: TextWorldExpressConfig, split: str, tasks: Sequence[str] | None, max_variations: int | None
) -> list[tuple[str, int]]:
    """The first ``max_variations`` (default ``cfg.max_variations``) seeds of the split's fold, per configured task.

    Raises:
        ValueError: An unknown split, task, game or game parameter (naming the ``benchmark.games`` entry).
    """
    if split not in FOLDS:
        raise ValueError(f"unknown TextWorld-Express split '{split}'; choose one of {', '.join(FOLDS)}")
    tasks = resolve_tasks(cfg, tasks or ())
    limit = cfg.max_variations if max_variations is None else max_variations
    env = Simulator(cfg)
    try:
        out = []
        for i, setting in enumerate(cfg.games):
            env.load(setting, f"benchmark.games[{i}]")
            if tasks and setting.task not in tasks:
                continue
            seeds = env.seeds(split)
            out += [(setting.task, s) for s in (seeds if limit is None else seeds[:limit])]
        return out
    finally:
        env.close()


class EpisodeEnv:
    """One TextWorld-Express env (one JVM) that plays evaluation episodes step by step."""

    def __init__(self, cfg: TextWorldExpressConfig) -> None:
        self.cfg = cfg
        self.env = Simulator(cfg)
        self.task_description = ""

    def reset(self, task: str, variation: int) -> Observation:
        """Start the game of ``task`` with seed ``variation``."""
        obs, infos = self.env.start(_setting(self.cfg, task), variation)
        self.task_description = infos["taskDescription"]
        return self._view(obs, infos, done=False)

    def step(self, action: str) -> Observation:
        """Take one action (an action not in the valid list is the env's to answer)."""
        obs, _reward, done, infos = self.env.step(action)
        return self._view(obs, infos, done=bool(done))

    def _view(self, obs: str, infos: dict[str, Any], done: bool) -> Observation:
        return Observation(observation=obs, task_description=self.task_description,
                           admissible=list(infos["validActions"]), score=100.0 * float(infos["score"]),
                           done=done)  # fmt: skip

    def close(self) -> None:
        """Stop the JVM."""
        self.env.close()


def env_factory(cfg: TextWorldExpressConfig, expert: bool) -> Callable[[], EpisodeEnv]:
    """Builds one evaluation env (one JVM) in a pool worker."""
    return functools.partial(EpisodeEnv, cfg)


def expert_env(cfg: TextWorldExpressConfig) -> Simulator:
    """The env gold sequences are played in."""
    return Simulator(cfg)


def erase_loops(env: Simulator, setting: GameSetting, seed: int, actions: Sequence[str]) -> list[str]:
    """``actions`` with every stretch that comes back to a state already on the path cut out.

    A state is the observation and the score after an action (the first observation before any); the actions are
    played in a plain load once to read them. Where a later action returns to a state seen before, the actions
    since that state are dropped (loop erasure of the walk), so what is left visits each state at most once.

    Args:
        env: The simulator.
        setting: The game.
        seed: Its seed.
        actions: The gold path.

    Returns:
        The loop-free path (the given one where it has no loop).
    """
    obs, infos = env.start(setting, seed)
    kept: list[str] = []
    states: list[tuple[str, float]] = [(obs, float(infos["score"]))]
    for action in actions:
        obs, _reward, done, infos = env.step(action)
        state = (obs, float(infos["score"]))
        if state in states:  # back where the path was: the loop since then goes
            at = states.index(state)
            del states[at + 1 :], kept[at:]
        else:
            states.append(state)
            kept.append(action)
        if done:
            break
    return kept


def play_expert(
    env: Simulator, cfg: TextWorldExpressConfig, task: str, variation: int, split: str
) -> tuple[Trajectory, dict[str, int], int]:
    """Play one seed's gold sequence in a plain load: (trajectory, counts, 1 attempt).

    The trajectory succeeds only when the game is won with full score; the counts say how the gold actions met
    the valid list and whether the path finished.
    """
    setting = _setting(cfg, task)
    env.start(setting, variation, gold_path=True)
    gold = [str(a) for a in env.getGoldActionSequence()]
    if cfg.erase_loops:
        gold = erase_loops(env, setting, variation, gold)
    obs, infos = env.start(setting, variation)
    description = infos["taskDescription"]
    steps: list[Step] = []
    for action in gold:
        valid = [str(a) for a in infos["validActions"]]
        next_obs, _reward, done, infos = env.step(action)
        steps.append(Step(observation=obs, action=action, admissible_actions=valid, action_admissible=action in valid,
                          score=100.0 * float(infos["score"])))  # fmt: skip
        obs = next_obs
        if done:
            break
    won = bool(infos["tasksuccess"]) and float(infos["score"]) >= 1.0
    counts = {"gold_actions": len(steps), "gold_not_in_valid": sum(not s.action_admissible for s in steps),
              "gold_unfinished": int(not won)}  # fmt: skip
    traj = Trajectory(
        trajectory_id=f"{cfg.name}/{task}/{variation}", benchmark=cfg.name, task_id=task, variation=variation,
        split=split, task_description=description, steps=steps, score=100.0 * float(infos["score"]), success=won,
        source=SOURCE,
    )  # fmt: skip
    return traj, counts, 1


def expert_summary(counts: dict[str, Any]) -> list[str]:
    """What ``nemo-act experts`` prints of the gold paths: actions, those not in the valid list, unfinished paths."""
    if "gold_actions" not in counts:
        return []
    return [f"gold actions: {counts['gold_actions']}, not in the valid list {counts['gold_not_in_valid']}; "
            f"gold paths that did not win: {counts['gold_unfinished']}"]  # fmt: skip
