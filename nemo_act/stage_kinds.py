"""The one table of stage kinds: what each trains with, on which data, with which prompt and reward.

Every consumer reads this table instead of naming kinds: the config schema (which names are valid), the
row builders (:func:`nemo_act.stage_data.rows_for`), the pipeline runner (which data steps a pipeline
needs, after which stages held-out selection accuracy is measured), the local engine (trainer and
reward functions) and the cluster engine (NeMo-RL algorithm, task name, hyperparameter block).

Adding a kind = one :class:`StageKind` entry here (+ its row builder in :mod:`nemo_act.stage_data`,
+ a ``train.<block>`` in ``conf/train/*.yaml`` if it needs hyperparameters of its own). A stage that
consumes a new kind of data adds one :class:`DataKind` entry (its builder, audit file and record type).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from nemo_act.config.schema import DPOStageConfig, ExperimentConfig, GRPOStageConfig, SFTStageConfig


@dataclass(frozen=True)
class DataKind:
    """One kind of data a stage consumes, and the step that builds it.

    Attributes:
        name: The kind, as a :class:`StageKind`'s ``data``.
        builder: ``module:function`` that builds it (``(cfg, experts, generator, folder, workers)`` ->
            :class:`~nemo_act.data.manifest.Summary`); None for the runner's own steps (experts, pairs).
        audit: The audit file the builder writes in its folder (the stage's rows are made from it).
        record: ``module:Class`` of the audit file's lines.
        config: The config block of its settings (``early_experience``, ``sand``, ``agent_r``); part of the
            fingerprint of every stage that consumes it (a row-mixing setting changes no audit file).
        policy: Whose samples the builder uses: ``init`` (the pipeline's initial policy, built once before
            the stages) or ``stage`` (the checkpoint the consuming stage starts from, built right before it:
            SAND's "current policy", so a second ``sand`` stage re-samples with the newest checkpoint).
    """

    name: str
    builder: str | None = None
    audit: str | None = None
    record: str | None = None
    config: str | None = None
    policy: Literal["init", "stage"] = "init"


DATA_KINDS: dict[str, DataKind] = {
    d.name: d
    for d in (
        DataKind("experts"),
        DataKind("pairs"),
        DataKind("early_experience", "nemo_act.reflection.early_experience:build_early_experience",
                 "reflections.jsonl", "nemo_act.reflection.early_experience:ReflectionRecord", "early_experience"),
        DataKind("agent_r", "nemo_act.reflection.agent_r:build_agent_r", "revisions.jsonl",
                 "nemo_act.reflection.agent_r:RevisionRecord", "agent_r"),
        DataKind("sand", "nemo_act.reflection.sand:build_sand", "deliberations.jsonl",
                 "nemo_act.reflection.sand:DeliberationRecord", "sand", policy="stage"),
    )
}  # fmt: skip


def load(ref: str) -> Any:
    """The object a ``module:name`` reference names (imported on first use: the table stays import-light)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class StageKind:
    """One stage kind.

    Attributes:
        name: The kind, as written in ``pipeline.stages``.
        algorithm: ``grpo``, ``sft`` or ``dpo`` (TRL's trainers; NeMo-RL's algorithms).
        data: What it consumes, a :data:`DATA_KINDS` name: ``pairs`` (ACT pairs), ``experts`` (expert
            trajectories) or a reflection baseline's audit file (:mod:`nemo_act.reflection`).
        rows: Name of its row builder in :mod:`nemo_act.stage_data`.
        prompt: ``selection`` (the ACT prompt over two candidates) or ``generation`` (act directly).
        reward: GRPO reward: ``selection`` (names the better candidate) or ``action`` (the expert's action).
        train: The ``train.<block>`` holding its hyperparameters.
        prompt_settings: ``prompt.*`` values the stage renders with (e.g. no reasoning instruction).
        selection_eval: Whether held-out selection accuracy is measured after it.
        summary: One line for help texts and docs.
        rounds: A config key (``sand.iterations``) saying how many times the stage runs in a row where a
            pipeline lists it once; each round's data is built by the newest checkpoint (see :func:`expand`).
    """

    name: str
    algorithm: Literal["grpo", "sft", "dpo"]
    data: str
    rows: str
    prompt: Literal["selection", "generation"]
    reward: Literal["selection", "action"] | None
    train: str
    prompt_settings: dict[str, Any] = field(default_factory=dict)
    selection_eval: bool = False
    summary: str = ""
    rounds: str | None = None

    def __post_init__(self) -> None:
        if self.data not in DATA_KINDS:
            raise ValueError(f"stage kind '{self.name}': data '{self.data}' is not in DATA_KINDS")


STAGE_KINDS: dict[str, StageKind] = {
    k.name: k
    for k in (
        StageKind("act", "grpo", "pairs", "act_rows", "selection", "selection", "act", selection_eval=True,
                  summary="ACT: GRPO on choosing the expert action of a pair, reasoning first"),
        StageKind("act_noreason", "grpo", "pairs", "act_rows", "selection", "selection", "act",
                  prompt_settings={"act_reasoning": False}, selection_eval=True,
                  summary="control: ACT without the reasoning instruction"),
        StageKind("sft_choice", "sft", "pairs", "sft_choice_rows", "selection", None, "sft_choice", selection_eval=True,
                  summary="control: SFT on the selection prompt -> the expert action, no rationale"),
        StageKind("dpo", "dpo", "pairs", "dpo_rows", "generation", None, "dpo", selection_eval=True,
                  summary="control: DPO, expert action chosen over the alternative"),
        StageKind("il", "sft", "experts", "il_rows", "generation", None, "il",
                  summary="imitation learning: SFT on expert actions"),
        StageKind("rl", "grpo", "experts", "rl_rows", "generation", "action", "rl",
                  summary="RL: GRPO on direct action generation, rewarded for the expert's action"),
        StageKind("ee", "sft", "early_experience", "ee_rows", "generation", None, "il",
                  summary="baseline: Early Experience, SFT on a self-reflection + the expert action (IL's budget)"),
        StageKind("ee_wm", "sft", "early_experience", "world_model_rows", "generation", None, "il",
                  summary="baseline: Early Experience, implicit world modelling (predict next observations)"),
        StageKind("agent_r", "sft", "agent_r", "agent_r_rows", "generation", None, "il",
                  summary="baseline: Agent-R, revision at the policy's first deviation + expert rows (IL's budget)"),
        StageKind("sand", "sft", "sand", "sand_rows", "generation", None, "il",
                  summary="baseline: SAND, execution-grounded deliberation + the expert action (IL's budget)",
                  rounds="sand.iterations"),
    )
}  # fmt: skip


def stage_kind(name: str) -> StageKind:
    """The table entry of ``name``; a clear error listing the kinds when there is none."""
    try:
        return STAGE_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown stage '{name}'; stages are: {', '.join(STAGE_KINDS)}") from None


def stage_config(kind: str, cfg: ExperimentConfig) -> SFTStageConfig | DPOStageConfig | GRPOStageConfig:
    """Hyperparameters of a stage kind (its ``train.<block>``)."""
    return getattr(cfg.train, stage_kind(kind).train)


def capped_rows(kind: str, rows: list[Any], cfg: ExperimentConfig) -> list[Any]:
    """A stage's rows cut to ``train.<kind>.max_samples`` (the first ones), so both engines train the same rows."""
    limit = stage_config(kind, cfg).max_samples
    return rows if limit is None else rows[:limit]


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


def data_steps(stages: list[str]) -> list[str]:
    """The data a pipeline of these stages consumes, in the order the runner builds it (experts first)."""
    wanted = {stage_kind(k).data for k in stages}
    return [d for d in DATA_KINDS if d in wanted or d == "experts"]


def built_data(kind: str) -> DataKind | None:
    """The table entry of a data kind a builder makes (a reflection baseline's), else None."""
    spec = DATA_KINDS[kind]
    return spec if spec.builder else None


def needs_pairs(stages: list[str]) -> bool:
    """Whether a pipeline of these stages needs ACT pairs (and so held-out pairs for selection accuracy)."""
    return any(stage_kind(k).data == "pairs" for k in stages)
