"""The one table of stage kinds: what each trains with, on which data, with which prompt and reward.

Every consumer reads this table instead of naming kinds: the config schema (which names are valid), the
row builders (:func:`nemo_act.stage_data.rows_for`), the pipeline runner (which data steps a pipeline
needs, after which stages held-out selection accuracy is measured), the local engine (trainer and
reward functions) and the cluster engine (NeMo-RL algorithm, task name, hyperparameter block).

Adding a kind = one :class:`StageKind` entry here (+ its row builder in :mod:`nemo_act.stage_data`,
+ a ``train.<block>`` in ``conf/train/*.yaml`` if it needs hyperparameters of its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from nemo_act.config.schema import DPOStageConfig, ExperimentConfig, GRPOStageConfig, SFTStageConfig


@dataclass(frozen=True)
class StageKind:
    """One stage kind.

    Attributes:
        name: The kind, as written in ``pipeline.stages``.
        algorithm: ``grpo``, ``sft`` or ``dpo`` (TRL's trainers; NeMo-RL's algorithms).
        data: What it consumes: ``pairs`` (ACT pairs), ``experts`` (expert trajectories) or a file a data
            step writes from them (``early_experience``, ``agent_r``: :mod:`nemo_act.reflection`).
        rows: Name of its row builder in :mod:`nemo_act.stage_data`.
        prompt: ``selection`` (the ACT prompt over two candidates) or ``generation`` (act directly).
        reward: GRPO reward: ``selection`` (names the better candidate) or ``action`` (the expert's action).
        train: The ``train.<block>`` holding its hyperparameters.
        prompt_settings: ``prompt.*`` values the stage renders with (e.g. no reasoning instruction).
        selection_eval: Whether held-out selection accuracy is measured after it.
        summary: One line for help texts and docs.
    """

    name: str
    algorithm: Literal["grpo", "sft", "dpo"]
    data: Literal["pairs", "experts", "early_experience", "agent_r"]
    rows: str
    prompt: Literal["selection", "generation"]
    reward: Literal["selection", "action"] | None
    train: str
    prompt_settings: dict[str, Any] = field(default_factory=dict)
    selection_eval: bool = False
    summary: str = ""


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


def stage_experiment(kind: str, cfg: ExperimentConfig) -> ExperimentConfig:
    """The experiment config a stage renders its prompts with (its ``prompt_settings`` applied)."""
    settings = stage_kind(kind).prompt_settings
    if not settings:
        return cfg
    return cfg.model_copy(update={"prompt": cfg.prompt.model_copy(update=settings)})


def data_steps(stages: list[str]) -> list[str]:
    """The data a pipeline of these stages consumes, in the order the runner builds it (experts first)."""
    wanted = {stage_kind(k).data for k in stages}
    return [d for d in ("experts", "pairs", "early_experience", "agent_r") if d in wanted or d == "experts"]


def needs_pairs(stages: list[str]) -> bool:
    """Whether a pipeline of these stages needs ACT pairs (and so held-out pairs for selection accuracy)."""
    return any(stage_kind(k).data == "pairs" for k in stages)
