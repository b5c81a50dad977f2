"""Training examples of every stage, as plain dicts: the one message construction all engines share.

Each builder returns rows in the conversational prompt/completion layout that TRL and NeMo-RL
data processors both take (``prompt`` is a list of chat messages):

* ``act``: selection prompt + what the reward needs (candidates, expert index, admissibility);
* ``sft_choice``: selection prompt -> ``<action>expert</action>`` (same pairs, SFT objective);
* ``dpo``: action-generation prompt, chosen = expert action, rejected = the alternative;
* ``il``: action-generation prompt -> ``<action>expert</action>`` for every expert state;
* ``rl``: action-generation prompt + expert action and the full admissible list for the reward.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import read_all
from nemo_act.data.records import Pair, Trajectory
from nemo_act.generation.simple import wrap_action
from nemo_act.prompts.render import as_messages, generation_prompt, selection_prompt
from nemo_act.prompts.state import expert_action, iter_states, state_id, trajectory_state
from nemo_act.seeding import key_digest

Row = dict[str, Any]


def _assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def act_rows(pairs: Iterable[Pair], cfg: ExperimentConfig) -> list[Row]:
    """ACT stage rows: the selection prompt and the reward's inputs."""
    return [
        {
            "prompt": as_messages(selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt)),
            "candidates": list(p.candidates),
            "expert_index": p.expert_index,
            "candidates_admissible": list(p.candidates_admissible),
            "admissible_actions": list(p.state.admissible_actions),
            "pair_id": p.pair_id,
        }
        for p in pairs
    ]


def sft_choice_rows(pairs: Iterable[Pair], cfg: ExperimentConfig) -> list[Row]:
    """SFT-on-choice control rows: selection prompt -> the expert action, no rationale."""
    return [
        {
            "prompt": as_messages(selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt)),
            "completion": _assistant(wrap_action(p.expert_action)),
        }
        for p in pairs
    ]


def selection_format_rows(pairs: Iterable[Pair], cfg: ExperimentConfig, seed: int) -> list[Row]:
    """Format-only selection rows: selection prompt -> one candidate picked by a seeded coin flip.

    The target carries no information about which candidate is better (it is the expert half of the
    time, independently of the pair); it only teaches a from-scratch model to answer the selection
    prompt by naming one of the candidates, as a pretrained model already does. Used by the demo's
    warm-up of its randomly initialised model; never by a pipeline stage.
    """
    rows = []
    for p in pairs:
        coin = key_digest("format", seed, p.pair_id)[0] & 1
        rows.append(
            {
                "prompt": as_messages(selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt)),
                "completion": _assistant(wrap_action(p.candidates[coin])),
            }
        )
    return rows


def dpo_rows(pairs: Iterable[Pair], cfg: ExperimentConfig) -> list[Row]:
    """DPO control rows: action-generation prompt; expert action chosen, alternative rejected."""
    return [
        {
            "prompt": as_messages(generation_prompt(p.state, p.benchmark, cfg.prompt)),
            "chosen": _assistant(wrap_action(p.expert_action)),
            "rejected": _assistant(wrap_action(p.alternative_action)),
        }
        for p in pairs
    ]


def _states(trajectories: Sequence[Trajectory], cfg: ExperimentConfig):
    for traj, i in iter_states(trajectories):
        state = trajectory_state(traj, i, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
        yield traj, i, state


def il_rows(trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """IL rows: action-generation prompt -> ``<action>expert</action>`` for every expert state."""
    return [
        {
            "prompt": as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
            "completion": _assistant(wrap_action(expert_action(traj, i))),
        }
        for traj, i, state in _states(trajectories, cfg)
    ]


def rl_rows(trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """RL rows: action-generation prompt and the action reward's inputs."""
    return [
        {
            "prompt": as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
            "expert_action": expert_action(traj, i),
            "admissible_actions": list(traj.steps[i].admissible_actions),
            "state_id": state_id(traj, i),
        }
        for traj, i, state in _states(trajectories, cfg)
    ]


def rows_for(kind: str, data: str | Path, cfg: ExperimentConfig) -> list[Row]:
    """Rows of a stage kind from its data file (what :data:`~nemo_act.stage_kinds.STAGE_KINDS` says it reads).

    Args:
        kind: Stage kind.
        data: Pairs or expert-trajectory JSONL.
        cfg: The config the stage renders prompts with (see ``stage_experiment``).
    """
    from nemo_act.stage_kinds import stage_kind

    spec = stage_kind(kind)
    build = globals()[spec.rows]
    if spec.data == "pairs":
        return build(read_all(data, Pair, "pairs"), cfg)
    return build(read_all(data, Trajectory, "expert trajectories"), cfg)
