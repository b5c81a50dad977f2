"""ALFWorld adapter (TextWorld engine): games of a split, rebuilt game files, episodes, handcoded expert.

**Games.** :func:`find_games` walks ``<data_dir>/json_2.1.1/<split>`` and applies ALFWorld's own
filter (``AlfredTWEnv.collect_game_files``): a trial needs ``traj_data.json`` and ``game.tw-pddl``, no
``movable``/``Sliced`` task, one of the six task types, and ``solvable`` true in the game file. On the
public game files this gives the protocol's 140 ``valid_seen`` (ID) and 134 ``valid_unseen`` (OOD)
episodes. ``data_dir`` is ``benchmark.data_dir``, else ``$ALFWORLD_DATA``.

**Rebuilt game files.** Released game files embed the grammar of the ALFWorld version that made them.
:func:`rebuilt_game` rebuilds each one the way ``alfworld-generate`` does, with the installed
package's ``alfred.pddl`` domain and ``add_task_to_grammar(alfred.twl2, traj_data)`` grammar and the
file's own PDDL problem, into a cache folder (``benchmark.cache_dir``; keyed by the source file's hash
and the package version). The user's files are only read.

**Episodes.** :class:`EpisodeEnv` plays one game at a time (TextWorld ``PddlEnv`` with ALFWorld's
demangler wrapper). The task is the intro's "Your task is to: ..." sentence; the observation is the
env's feedback; admissible actions are the env's list without ``help`` (as verl-agent and the paper's
peers drop it); score is 100 when won, else 0. With ``expert=True`` every view also carries the
handcoded expert's next action (``AlfredExpert(HANDCODED)``, ``extra.expert_plan``): the gold policy
and expert collection use it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from nemo_act.benchmarks import textworld_compat
from nemo_act.benchmarks.base import Observation
from nemo_act.config.schema import BenchmarkConfigBase
from nemo_act.data.records import Step, Trajectory

SPLITS = ("train", "valid_seen", "valid_unseen")
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
DATASET = "json_2.1.1"
# Bump when what an experts file holds changes (part of the experts manifest).
ADAPTER_VERSION = 1
PAPER_COLUMNS = (  # the paper's in-distribution (seen games) and out-of-distribution success columns
    {"key": "alfworld_id", "label": "ALFWorld ID success %", "split": "valid_seen", "metric": "completion", "order": 0},
    {"key": "alfworld_ood", "label": "ALFWorld OOD success %", "split": "valid_unseen", "metric": "completion",
     "order": 1},
)  # fmt: skip


class ALFWorldConfig(BenchmarkConfigBase):
    """ALFWorld (pip package `alfworld`, TextWorld engine)."""

    name: Literal["alfworld"]
    data_dir: str | None = Field(description="Folder holding json_2.1.1/ (None: $ALFWORLD_DATA).")
    cache_dir: str = Field(description="Where game files rebuilt for the installed ALFWorld are cached.")
    expert_retries: int = Field(ge=0, description="Extra tries of the (randomised) handcoded expert on a lost game.")


SOURCE = "alfworld-handcoded-expert"
_DROPPED_COMMANDS = frozenset({"help"})
_TASK_MARK = "Your task is to: "


def data_dir(cfg: ALFWorldConfig) -> Path:
    """The ALFWorld data folder (holding ``json_2.1.1/``).

    Raises:
        FileNotFoundError: Neither ``benchmark.data_dir`` nor ``$ALFWORLD_DATA`` names a folder with games.
    """
    root = cfg.data_dir or os.environ.get("ALFWORLD_DATA")
    if not root or not (Path(root) / DATASET).is_dir():
        raise FileNotFoundError(
            f"ALFWorld games not found: set benchmark.data_dir (or ALFWORLD_DATA) to the folder holding "
            f"{DATASET}/ (got {root!r}); `alfworld-download` fetches them"
        )
    return Path(root)


def find_games(root: Path, split: str) -> list[Path]:
    """The game files of a split after ALFWorld's filtering, sorted by path.

    Args:
        root: The data folder (holding ``json_2.1.1/``).
        split: ``train``, ``valid_seen`` or ``valid_unseen``.

    Returns:
        Paths of ``game.tw-pddl`` files.

    Raises:
        ValueError: Unknown split.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown ALFWorld split '{split}'; choose one of {', '.join(SPLITS)}")
    games = []
    for traj_path in sorted((root / DATASET / split).glob("**/traj_data.json")):
        trial = traj_path.parent
        game = trial / "game.tw-pddl"
        if "movable" in str(trial) or "Sliced" in str(trial) or not game.exists():
            continue
        if json.loads(traj_path.read_text()).get("task_type") not in TASK_TYPES:
            continue
        if json.loads(game.read_text()).get("solvable"):
            games.append(game)
    return games


def game_id(root: Path, game: Path) -> str:
    """Episode id of a game: ``<split>/<task folder>/<trial folder>``."""
    return str(game.parent.relative_to(root / DATASET))


def rebuilt_game(root: Path, gid: str, cache_dir: Path) -> Path:
    """The game file of ``gid`` rebuilt with the installed ALFWorld's domain and grammar (cached)."""
    from alfworld.agents.utils.misc import add_task_to_grammar
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    trial = root / DATASET / gid
    source = (trial / "game.tw-pddl").read_bytes()
    traj_text = (trial / "traj_data.json").read_text()
    key = hashlib.sha256(source + traj_text.encode() + version("alfworld").encode()).hexdigest()[:16]
    folder = cache_dir / gid / key  # the handcoded expert reads traj_data.json beside the game file
    out = folder / "game.tw-pddl"
    if out.exists():
        return out
    game = json.loads(source)
    rebuilt = {
        "pddl_domain": Path(ALFRED_PDDL_PATH).read_text(),
        "grammar": add_task_to_grammar(Path(ALFRED_TWL2_PATH).read_text(), json.loads(traj_text)),
        "pddl_problem": game["pddl_problem"],
        "solvable": game.get("solvable"),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("traj_data.json", traj_text), ("game.tw-pddl", json.dumps(rebuilt))):
        tmp = folder / f".{name}.tmp{os.getpid()}"
        tmp.write_text(text)
        tmp.replace(folder / name)  # atomic; the game file last, so its presence means complete
    return out


def games(cfg: ALFWorldConfig, split: str, limit: int | None = None) -> list[tuple[str, int]]:
    """Evaluation / collection episodes of a split as ``(game id, 0)`` (one episode per game)."""
    root = data_dir(cfg)
    games = find_games(root, split)
    return [(game_id(root, g), 0) for g in games[:limit]]


def split_intro(feedback: str) -> tuple[str, str]:
    """Split the first feedback into (task, observation): the task sentence and the room description."""
    text = feedback.split("-= Welcome to TextWorld, ALFRED! =-", 1)[-1].strip()
    head, mark, task = text.partition(_TASK_MARK)
    if not mark:
        return "", text
    return task.strip(), head.strip()


class EpisodeEnv:
    """One ALFWorld (TextWorld) env that plays games step by step; views are :class:`Observation`.

    Args:
        cfg: Benchmark config (``data_dir``, ``cache_dir``).
        expert: Compute the handcoded expert's next action at every step (``expert_action``).
    """

    def __init__(self, cfg: ALFWorldConfig, expert: bool = False) -> None:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import (
            AlfredDemangler,
            AlfredExpert,
            AlfredExpertType,
            AlfredInfos,
        )
        from textworld.envs import PddlEnv

        textworld_compat.apply()  # Python 3.13 (NeMo-RL's image): its grammar eval lost its variables
        self.cfg = cfg
        self.root = data_dir(cfg)
        self.cache_dir = Path(os.path.expanduser(cfg.cache_dir))
        self.expert = expert
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
        self.env = AlfredExpert(env, expert_type=AlfredExpertType.HANDCODED) if expert else env
        self.task_description = ""

    def reset(self, gid: str, variation: int = 0, attempt: int = 0) -> Observation:
        """Start the game ``gid`` (``variation`` is always 0: one episode per game).

        The handcoded expert draws from Python's ``random``; it is seeded from (game, attempt), so an
        episode repeats exactly and a retried expert collection tries a different draw.
        """
        random.seed(f"{gid}/{attempt}")
        self.env.load(str(rebuilt_game(self.root, gid, self.cache_dir)))
        state = self.env.reset()
        self.task_description, observation = split_intro(state["feedback"])
        return self._view(state, observation, done=False)

    def step(self, action: str) -> Observation:
        """Take one action (TextWorld answers unknown commands with "Nothing happens.")."""
        state, _reward, done = self.env.step(action)
        return self._view(state, state["feedback"].strip(), done=bool(done) or bool(state["won"]))

    def _view(self, state: Any, observation: str, done: bool) -> Observation:
        return Observation(
            observation=observation,
            task_description=self.task_description,
            admissible=[c for c in state["admissible_commands"] if c not in _DROPPED_COMMANDS],
            score=100.0 if state["won"] else 0.0,
            done=done,
            expert_action=state["extra.expert_plan"][0] if self.expert else None,
        )

    def close(self) -> None:
        """Close the TextWorld env."""
        self.env.close()


def play_handcoded(env: EpisodeEnv, gid: str, split: str, max_steps: int, attempt: int = 0) -> Trajectory:
    """Play one game with the handcoded expert and record it.

    ``success`` is a win within ``max_steps`` using only listed actions: when the expert proposes a
    command we drop from the list (``help``), the episode stops there unwon (the caller may retry;
    the expert is randomised).

    Args:
        env: An env made with ``expert=True``.
        gid: Game id.
        split: Split the game belongs to (recorded).
        max_steps: Step cap (the protocol's 50).
        attempt: Try number (seeds the expert's draws).

    Returns:
        The trajectory; every recorded action was in the admissible list when taken.
    """
    view = env.reset(gid, attempt=attempt)
    steps: list[Step] = []
    while not view.done and len(steps) < max_steps:
        action = view.expert_action or ""
        if action in _DROPPED_COMMANDS:
            break  # the expert sometimes says "help": not an action we offer, so the episode counts as lost
        nxt = env.step(action)
        steps.append(
            Step(
                observation=view.observation,
                action=action,
                admissible_actions=view.admissible,
                action_admissible=action in view.admissible,
                score=nxt.score,
            )
        )
        view = nxt
    return Trajectory(
        trajectory_id=f"alfworld/{gid}/0",
        benchmark="alfworld",
        task_id=gid,
        variation=0,
        split=split,
        task_description=env.task_description,
        steps=steps,
        score=view.score,
        success=view.score >= 100,
        source=SOURCE,
    )


# ---- the benchmark protocol (nemo_act/benchmarks/base.py) ------------------------------------------------------
CONFIG = ALFWorldConfig
LIVE_EXPERT_ACTION = True  # the handcoded expert proposes the next action in the live env (gold policy needs no file)


def episodes(
    cfg: ALFWorldConfig, split: str, tasks: Sequence[str] | None, max_variations: int | None
) -> list[tuple[str, int]]:
    """One episode per game after ALFWorld's filtering; ``tasks`` keeps game ids containing one of them."""
    return [g for g in games(cfg, split) if not tasks or any(t in g[0] for t in tasks)]


def env_factory(cfg: ALFWorldConfig, expert: bool) -> Callable[[], EpisodeEnv]:
    """Builds one evaluation env (``expert``: with the handcoded expert's next action in every view)."""
    return functools.partial(EpisodeEnv, cfg, expert=expert)


def expert_env(cfg: ALFWorldConfig) -> EpisodeEnv:
    """The env the handcoded expert plays in."""
    return EpisodeEnv(cfg, expert=True)


def play_expert(
    env: EpisodeEnv, cfg: ALFWorldConfig, task: str, variation: int, split: str
) -> tuple[Trajectory, None, int]:
    """Play one game with the (randomised) handcoded expert, retrying a lost one ``cfg.expert_retries`` times."""
    attempt = 0
    while True:
        attempt += 1
        traj = play_handcoded(env, task, split, cfg.max_steps, attempt=attempt - 1)
        if traj.success or attempt > cfg.expert_retries:
            return traj, None, attempt


def expert_summary(counts: dict[str, Any]) -> list[str]:
    """What ``nemo-act experts`` prints of ALFWorld's own counts: the handcoded expert's attempts."""
    if "attempts" not in counts:
        return []
    lost = len(counts["failed"])
    return [f"handcoded-expert attempts: {counts['attempts']} for {counts['episodes']} games; lost: {lost}"]
