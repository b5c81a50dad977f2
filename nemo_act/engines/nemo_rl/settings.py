"""The cluster engine's settings: the ``engine`` block of ``conf/engine/nemo_rl.yaml`` and the cluster recipes.

Owned by the engine, not the core schema (which holds no engine's fields): the config names this engine
(``engine.name: nemo_rl``) and its block is checked against :data:`CONFIG` (``nemo_act.common.plugins``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_act.config.schema import EngineConfigBase, ExperimentConfig, VLLMSettings


class _Settings(BaseModel):
    """Unknown keys are rejected, as everywhere in the config."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterShape(_Settings):
    """Nodes and GPUs one cluster-engine stage runs on (NeMo-RL ``cluster``)."""

    num_nodes: int = Field(gt=0)
    gpus_per_node: int = Field(gt=0, description="GH200 nodes: 4; DGX H100: 8.")
    gpu: Literal["gh200_96gb", "gh200_144gb", "h100_80gb", "h200_141gb"] = Field(
        description="GPU type: its memory bounds the layout planner's estimate."
    )


class MegatronParallelism(_Settings):
    """Megatron-Core layout and memory settings of the trained policy (NeMo-RL ``policy.megatron_cfg``)."""

    tensor_parallel: int = Field(gt=0)
    pipeline_parallel: int = Field(gt=0)
    context_parallel: int = Field(gt=0)
    expert_parallel: int = Field(gt=0, description="EP: experts split over this many ranks (MoE).")
    expert_tensor_parallel: int | None = Field(gt=0, description="ETP for expert layers (None: NeMo-RL's default).")
    sequence_parallel: bool = Field(description="Needs tensor_parallel > 1 to matter.")
    activation_checkpointing: bool
    distributed_optimizer: bool


class NeMoRLSettings(_Settings):
    """How the cluster engine maps a stage onto NeMo-RL (see ``nemo_act.engines.nemo_rl.recipe``)."""

    bases: dict[Literal["grpo", "sft", "dpo"], str] = Field(
        description="NeMo-RL example config each algorithm inherits, in the pinned release's examples/configs."
    )
    cluster: ClusterShape
    megatron: MegatronParallelism
    precision: Literal["bf16", "fp8"] = Field(description="fp8 = TE blockwise e4m3 training + FP8 vLLM rollouts.")
    vllm: VLLMSettings
    vllm_kwargs: dict[str, Any] = Field(
        description="Extra vLLM engine arguments of GRPO rollouts (policy.generation.vllm_kwargs)."
    )
    max_total_sequence_length: int = Field(gt=0, description="Prompt + response tokens of a GRPO sample.")
    micro_batch_size: int = Field(gt=0, description="Sequences per GPU per forward pass.")
    save_period: int = Field(gt=0, description="NeMo-RL checkpoint every N steps (requeued jobs resume there).")
    save_deadline_margin_s: int = Field(
        ge=0,
        description="Seconds before the Slurm job's end by which NeMo-RL writes its last checkpoint "
        "(checkpointing.checkpoint_must_save_by): the job's USR1 requeue margin plus the time a save takes.",
    )
    dump_train_data: bool = Field(
        description="Let NeMo-RL's GRPO write train_data_step<N>.jsonl (every sample's tokens) each step."
    )
    overrides: dict[str, Any] = Field(description="Raw NeMo-RL keys (dotted) applied last: the escape hatch.")


class NeMoRLEngineConfig(EngineConfigBase):
    """The ``engine`` block of the cluster engine: the NeMo-RL pin (``conf/engine/_nemo_rl_pin.yaml``) and settings."""

    nemo_rl_release: str = Field(description="The one pinned NeMo-RL release (git tag).")
    nemo_rl_commit: str | None = Field(
        description="The tag's commit: the twin lane checks a user's NeMo-RL source against it (None: a run's "
        "config.yaml written before it was pinned)."
    )
    nemo_rl_container: str = Field(description="Its release container image.")
    nemo_rl: NeMoRLSettings = Field(description="How a stage maps onto NeMo-RL.")

    @model_validator(mode="before")
    @classmethod
    def _pinned_commit(cls, value: Any) -> Any:
        """A run's config.yaml written before the commit was pinned (2026-12-03) lacks it."""
        return {"nemo_rl_commit": None, **value} if isinstance(value, dict) else value


def nemo_rl_settings(cfg: ExperimentConfig) -> NeMoRLSettings:
    """``engine.nemo_rl`` of a config, or a clear error when the config is for another engine."""
    if not isinstance(cfg.engine, NeMoRLEngineConfig):
        raise ValueError("engine.nemo_rl is not set: compose the config with engine=nemo_rl or a cluster recipe")
    return cfg.engine.nemo_rl
