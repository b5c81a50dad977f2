"""What every stage's rows go through, whichever kind built them: the one message construction all engines share.

A stage kind's row builder (named by its entry: the shipped ones in :mod:`nemo_act.kinds`, yours in a module of your
``extensions``) returns rows in the conversational prompt/completion layout that TRL and NeMo-RL data processors both
take (``prompt`` is a list of chat messages). :func:`rows_for` reads the stage's data file, calls the builder, fits
the rows to the model's context and caps them, once for every engine; the helpers here are what builders share
(:func:`sourced`, :func:`assistant`, :func:`expert_states`). A stage's settings: :func:`stage_config`,
:func:`stage_experiment`, :func:`expand`. The warm-up's format-only selection rows (:func:`selection_format_rows`)
are no stage's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from nemo_act.common.plugins import load
from nemo_act.common.seeding import key_digest
from nemo_act.config.schema import DPOStageConfig, ExperimentConfig, GRPOStageConfig, SFTStageConfig
from nemo_act.data.io import read_all
from nemo_act.data.manifest import manifest_path, read_manifest
from nemo_act.data.records import Pair, State, Trajectory
from nemo_act.generation.simple import wrap_action
from nemo_act.prompts.length import SOURCE_KEY, RowLengths, fit_rows, origins, report
from nemo_act.prompts.render import as_messages, selection_prompt
from nemo_act.prompts.state import iter_states, trajectory_state
from nemo_act.stage_kinds import built_data, reward_kind, stage_kind

Row = dict[str, Any]


def sourced(build: Callable[..., list[Row]]) -> Callable[..., list[Row]]:
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


def assistant(text: str) -> list[dict[str, str]]:
    """A completion of one assistant message."""
    return [{"role": "assistant", "content": text}]


def sft_row(prompt: str, completion: str, source: str | None = None) -> Row:
    """An SFT row: one user message -> one assistant message, with the state or pair it came from (if any)."""
    row: Row = {"prompt": as_messages(prompt), "completion": assistant(completion)}
    if source is not None:
        row[SOURCE_KEY] = source
    return row


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
            sft_row(selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt), wrap_action(p.candidates[coin]))
        )
    return rows


def expert_states(trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> Iterator[tuple[Trajectory, int, State]]:
    """Every decision state of the expert trajectories, with its trajectory and index, as the prompts show it."""
    for traj, i in iter_states(trajectories):
        state = trajectory_state(traj, i, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
        yield traj, i, state


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
            experts = _built_from(kind, data, str(built.builder))
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


def _built_from(kind: str, data: str | Path, builder: str) -> str:
    """The experts file a built data file's manifest names (``inputs.experts.path``), or one line saying what is wrong.

    Raises:
        ValueError: ``data`` has no manifest, or its manifest names no experts: it is not what the kind's builder
            writes (an experts file handed where a built file is read, say).
    """
    where = manifest_path(data)
    try:
        return str(read_manifest(data)["inputs"]["experts"]["path"])
    except FileNotFoundError:
        why = f"it has no manifest ({where})"
    except (KeyError, TypeError):
        why = f"its manifest ({where}) names no inputs.experts"
    raise ValueError(f"stage {kind} reads {data}, but {why}: give it the file its data builder {builder} writes")


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
