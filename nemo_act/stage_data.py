"""Training examples of every stage, as plain dicts: the one message construction all engines share.

Each builder returns rows in the conversational prompt/completion layout that TRL and NeMo-RL
data processors both take (``prompt`` is a list of chat messages):

* ``act``: selection prompt + what the reward needs (candidates, expert index, admissibility);
* ``sft_choice``: selection prompt -> ``<action>expert</action>`` (same pairs, SFT objective);
* ``dpo``: action-generation prompt, chosen = expert action, rejected = the alternative;
* ``il``: action-generation prompt -> ``<action>expert</action>`` for every expert state;
* ``rl``: action-generation prompt + expert action and the full admissible list for the reward;
* ``ee``: action-generation prompt -> kept reflection + ``<action>expert</action>``, mixed with plain
  ``il`` rows (``early_experience.expert_rows_per_reflection``);
* ``ee_wm``: the world-modelling prompt of each executed action -> the env's next observation, mixed the
  same way;
* ``agent_r``: the revision turn + the expert's action after the policy's wrong step, plus every expert row;
* ``sand``: every expert state -> its kept deliberation (if any) + ``<action>expert</action>``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from nemo_act.common.plugins import load
from nemo_act.common.seeding import key_digest, key_rng
from nemo_act.config.schema import DPOStageConfig, ExperimentConfig, GRPOStageConfig, SFTStageConfig
from nemo_act.data.io import read_all
from nemo_act.data.manifest import read_manifest
from nemo_act.data.records import Pair, Trajectory
from nemo_act.generation.simple import wrap_action
from nemo_act.prompts.length import SOURCE_KEY, RowLengths, fit_rows, origins, report
from nemo_act.prompts.render import as_messages, generation_prompt, selection_prompt, world_model_prompt
from nemo_act.prompts.state import build_state, expert_action, iter_states, state_id, trajectory_state
from nemo_act.reflection.agent_r import RevisionRecord, revision_history
from nemo_act.reflection.early_experience import ReflectionRecord, reflection_body
from nemo_act.stage_kinds import built_data, reward_kind, stage_kind

Row = dict[str, Any]


def _sourced(build: Callable[..., list[Row]]) -> Callable[..., list[Row]]:
    """A row builder as callers see it: rows without their :data:`SOURCE_KEY` (``__wrapped__`` keeps it).

    Builders record the state each row came from, so :func:`rows_for` can name the trace of a row it skips;
    nothing else reads that key, and no engine should receive it.
    """

    @functools.wraps(build)
    def plain(*args: Any, **kwargs: Any) -> list[Row]:
        return _split_sources(build(*args, **kwargs))[0]

    return plain


def _split_sources(rows: list[Row]) -> tuple[list[Row], list[str]]:
    """Rows without :data:`SOURCE_KEY`, and each row's source ('' where a builder set none): the one place it goes."""
    return [{k: v for k, v in r.items() if k != SOURCE_KEY} for r in rows], [str(r.get(SOURCE_KEY, "")) for r in rows]


def _assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


@_sourced
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
            SOURCE_KEY: p.pair_id,
        }
        for p in pairs
    ]


@_sourced
def policy_act_rows(pairs: Iterable[Pair], trajectories: Iterable[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """``act_onpolicy`` rows: :func:`act_rows` of the pairs the round's policy sampled.

    A built data kind's builder also gets the expert trajectories; these rows need nothing more than the pairs.
    """
    del trajectories
    return act_rows.__wrapped__(pairs, cfg)


@_sourced
def sft_choice_rows(pairs: Iterable[Pair], cfg: ExperimentConfig) -> list[Row]:
    """SFT-on-choice control rows: selection prompt -> the expert action, no rationale."""
    return [
        {
            "prompt": as_messages(selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt)),
            "completion": _assistant(wrap_action(p.expert_action)),
            SOURCE_KEY: p.pair_id,
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
        coin = key_digest("format", seed, p.pair_id)[0] % len(p.candidates)  # 2 candidates: the low bit, as before
        rows.append(
            {
                "prompt": as_messages(selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt)),
                "completion": _assistant(wrap_action(p.candidates[coin])),
            }
        )
    return rows


@_sourced
def dpo_rows(pairs: Iterable[Pair], cfg: ExperimentConfig) -> list[Row]:
    """DPO control rows: action-generation prompt; expert action chosen, alternative rejected."""
    return [
        {
            "prompt": as_messages(generation_prompt(p.state, p.benchmark, cfg.prompt)),
            "chosen": _assistant(wrap_action(p.expert_action)),
            "rejected": _assistant(wrap_action(p.alternative_action)),
            SOURCE_KEY: p.pair_id,
        }
        for p in pairs
    ]


def _states(trajectories: Sequence[Trajectory], cfg: ExperimentConfig):
    for traj, i in iter_states(trajectories):
        state = trajectory_state(traj, i, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
        yield traj, i, state


@_sourced
def il_rows(trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """IL rows: action-generation prompt -> ``<action>expert</action>`` for every expert state."""
    return [
        {
            "prompt": as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
            "completion": _assistant(wrap_action(expert_action(traj, i))),
            SOURCE_KEY: state_id(traj, i),
        }
        for traj, i, state in _states(trajectories, cfg)
    ]


@_sourced
def rl_rows(trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """RL rows: action-generation prompt and the action reward's inputs."""
    return [
        {
            "prompt": as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
            "expert_action": expert_action(traj, i),
            "admissible_actions": list(traj.steps[i].admissible_actions),
            "state_id": state_id(traj, i),
            SOURCE_KEY: state_id(traj, i),
        }
        for traj, i, state in _states(trajectories, cfg)
    ]


def rows_for(kind: str, data: str | Path, cfg: ExperimentConfig, tokenizer: str | None = None) -> list[Row]:
    """The rows a stage trains on, from its data file (what :data:`~nemo_act.stage_kinds.STAGE_KINDS` says it reads).

    Built by the kind's row builder, then fitted and capped here, once, for every engine: each row is checked
    against ``model.max_context_tokens`` with the tokenizer of the checkpoint the stage starts from
    (:mod:`nemo_act.prompts.length`): prompt + answer, or prompt + the stage's ``max_completion_length`` for GRPO.
    A row over it is skipped, with a line on stderr naming the file and line of its trace, so no sequence over the
    model's context reaches a trainer. The rows left are cut to ``train.<block>.max_samples`` (the first ones).

    Args:
        kind: Stage kind.
        data: Pairs, expert-trajectory or Early Experience audit JSONL.
        cfg: The config the stage renders prompts with (see :func:`stage_experiment`).
        tokenizer: The stage's starting checkpoint (its tokenizer counts tokens); None: no token check (a
            dry run, which loads nothing).
    """
    spec = stage_kind(kind)
    build = load(spec.rows)
    build = getattr(build, "__wrapped__", build)  # ours keep the source key for the token check's messages
    if spec.data == "pairs":
        experts = read_manifest(data).get("inputs", {}).get("experts", {}).get("path")
        built_rows = build(read_all(data, Pair, "pairs"), cfg)
    else:
        built = built_data(spec.data)
        if built is not None:  # a baseline's audit file; its manifest names the experts it was built from
            experts = read_manifest(data)["inputs"]["experts"]["path"]
            records = read_all(data, load(str(built.record)), spec.data)
            built_rows = build(records, read_all(experts, Trajectory, "expert trajectories"), cfg)
        else:
            experts = data
            built_rows = build(read_all(data, Trajectory, "expert trajectories"), cfg)
    rows, sources = _split_sources(built_rows)
    lengths = (
        None if tokenizer is None or not rows else RowLengths.from_checkpoint(tokenizer, cfg.model.enable_thinking)
    )
    reserve = stage_config(kind, cfg).max_completion_length if spec.algorithm == "grpo" else 0
    kept, skipped = fit_rows(rows, sources, lengths, cfg.model.max_context_tokens, reserve, _Origins(experts))
    report(
        f"stage {kind} ({data})", skipped, len(rows),
        f"rows over model.max_context_tokens ({cfg.model.max_context_tokens})",
    )  # fmt: skip
    return capped(kind, kept, cfg)


def capped(kind: str, rows: list[Row], cfg: ExperimentConfig) -> list[Row]:
    """A stage's rows cut to ``train.<block>.max_samples`` (the first ones), so every engine trains the same rows.

    :func:`rows_for`'s last step, and what ready-made rows (the demo's warm-up) go through instead.
    """
    limit = stage_config(kind, cfg).max_samples
    return rows if limit is None else rows[:limit]


class _Origins(dict):
    """Trajectory id -> ``file:line``, read from the experts file only when a row is skipped (rarely)."""

    def __init__(self, experts: str | Path | None) -> None:
        super().__init__()
        self.experts, self.loaded = experts, False

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        if not self.loaded and self.experts is not None and Path(self.experts).is_file():
            self.update(origins(read_all(self.experts, Trajectory, "expert trajectories"), self.experts))
        self.loaded = True
        return super().get(key, default)


def _mixed(rows: list[Row], trajectories: Sequence[Trajectory], cfg: ExperimentConfig, tag: str) -> list[Row]:
    """``rows`` plus ``expert_rows_per_reflection`` x as many plain IL rows, drawn with a fixed seed."""
    plain = il_rows.__wrapped__(trajectories, cfg)
    n = min(round(cfg.early_experience.expert_rows_per_reflection * len(rows)), len(plain))
    return rows + key_rng(tag, cfg.early_experience.seed).sample(plain, n)


def _record_states(records: Sequence[ReflectionRecord], trajectories: Sequence[Trajectory], cfg: ExperimentConfig):
    """Each audit record with its trajectory and decision state."""
    by_id = {t.trajectory_id: t for t in trajectories}
    for r in records:
        traj = by_id[r.trajectory_id]
        yield r, traj, trajectory_state(traj, r.index, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)


@_sourced
def ee_rows(
    records: Sequence[ReflectionRecord], trajectories: Sequence[Trajectory], cfg: ExperimentConfig
) -> list[Row]:
    """Early Experience rows: each kept reflection, then the expert action, after the action-generation prompt."""
    rows = []
    for r, traj, state in _record_states(records, trajectories, cfg):
        if not r.kept or r.reflection is None:
            continue
        rows.append(
            {
                "prompt": as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
                "completion": _assistant(f"{reflection_body(r.reflection)}\n{wrap_action(r.expert_action)}"),
                SOURCE_KEY: state_id(traj, r.index),
            }
        )
    return _mixed(rows, trajectories, cfg, "ee-mix")


@_sourced
def world_model_rows(
    records: Sequence[ReflectionRecord], trajectories: Sequence[Trajectory], cfg: ExperimentConfig
) -> list[Row]:
    """Implicit world-modelling rows: for every executed action of a state, predict the env's next observation."""
    rows = []
    for r, traj, state in _record_states(records, trajectories, cfg):
        for c in r.candidates:
            if c.observation is not None:
                prompt = world_model_prompt(state, c.action, traj.benchmark, cfg.prompt)
                rows.append(
                    {
                        "prompt": as_messages(prompt),
                        "completion": _assistant(c.observation.strip()),
                        SOURCE_KEY: state_id(traj, r.index),
                    }
                )
    return _mixed(rows, trajectories, cfg, "wm-mix")


@_sourced
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
        rows.append(
            {
                "prompt": as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
                "completion": _assistant(f"{r.revision}\n{wrap_action(action)}"),
                SOURCE_KEY: state_id(traj, r.deviation),
            }
        )
    return rows + il_rows.__wrapped__(trajectories, cfg)


@_sourced
def sand_rows(records: Sequence[Any], trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """SAND rows: the expert trajectories, with the kept deliberation as the thought before the expert action.

    Every expert state gets one row (the trajectory is the SFT target); a state with a kept deliberation has
    it before the action, the others the plain expert action (a state whose samples all equal the expert's
    has no deliberation by design).
    """
    thought = {r.state_id: reflection_body(r.deliberation) for r in records if r.kept and r.deliberation}
    rows = []
    for traj, i, state in _states(trajectories, cfg):
        think = thought.get(state_id(traj, i))
        action = wrap_action(expert_action(traj, i))
        rows.append(
            {
                "prompt": as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
                "completion": _assistant(f"{think}\n{action}" if think else action),
                SOURCE_KEY: state_id(traj, i),
            }
        )
    return rows


def stage_config(kind: str, cfg: ExperimentConfig) -> SFTStageConfig | DPOStageConfig | GRPOStageConfig:
    """Hyperparameters of a stage kind: its ``train.<block>``, with ``budget_of``'s epochs and max_steps if named."""
    spec = stage_kind(kind)
    own = getattr(cfg.train, spec.train)
    if spec.budget_of is None:
        return own
    budget = getattr(cfg.train, spec.budget_of)
    return own.model_copy(update={"epochs": budget.epochs, "max_steps": budget.max_steps})


def stage_experiment(kind: str, cfg: ExperimentConfig) -> ExperimentConfig:
    """The experiment config a stage renders its prompts with (its ``prompt_settings`` applied)."""
    settings = stage_kind(kind).prompt_settings
    if not settings:
        return cfg
    return cfg.model_copy(update={"prompt": cfg.prompt.model_copy(update=settings)})


def expand(stages: list[str], cfg: ExperimentConfig) -> list[str]:
    """The stages a pipeline runs: each kind with ``rounds`` repeated as often as its config key says."""
    out = []
    for k in stages:
        rounds = stage_kind(k).rounds
        n = 1
        if rounds:
            block, _, key = rounds.partition(".")
            n = int(getattr(getattr(cfg, block), key))
        out += [k] * n
    return out


def reward_values(reward: str, cfg: ExperimentConfig) -> Any:
    """A reward's values block of the config (``rewards.selection``, ...)."""
    node: Any = cfg
    for part in reward_kind(reward).values.split("."):
        node = getattr(node, part)
    return node
