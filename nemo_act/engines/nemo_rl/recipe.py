"""Our stage settings -> a NeMo-RL master config (engine-free: plain dicts, no NeMo-RL import).

A cluster stage's NeMo-RL config is built in three layers, last wins:

1. ``engine.nemo_rl.bases[<algorithm>]``: the pinned release's own example config
   (``examples/configs/<file>`` of NeMo-RL, loaded by the driver with NeMo-RL's loader), so every
   key NeMo-RL reads is present with the release's value;
2. :func:`stage_overlay`: what nemo-act decides, from the one experiment config the local engine
   reads too (``train.<stage>``, ``rewards``, ``model``, ``engine.nemo_rl``);
3. ``engine.nemo_rl.overrides``: raw dotted NeMo-RL keys, the user's escape hatch.

How our stage settings map (documented here because NeMo-RL and TRL name them differently):

* GRPO ``batch_size x grad_accum`` = completions per optimizer step over the whole job
  (``policy.train_global_batch_size``); ``/ num_generations`` = ``grpo.num_prompts_per_step``.
* ``beta`` -> ``loss_fn.reference_policy_kl_penalty``; ``epsilon`` -> ``ratio_clip_min/max``;
  ``loss_type`` grpo -> sequence-level loss, dapo / bnpo -> token-level (NeMo-RL has no dr_grpo).
* ``max_steps = -1`` -> ``floor(epochs x floor(rows / per step))``: NeMo-RL drops a partial batch.
* ``max_grad_norm`` -> ``policy.max_grad_norm`` and Megatron ``clip_grad`` (the SFT base has 0).
* ``baseline`` -> ``grpo.use_leave_one_out_baseline`` (the GRPO base has true; ours: group_mean).
* ``lr_scheduler`` constant / cosine / linear -> Megatron ``lr_decay_style`` (cosine and linear
  decay to 0 like transformers'); warm-up from 0 over ``warmup_ratio`` of the steps.
* ``precision: fp8`` -> Transformer Engine blockwise e4m3 training, FP8 vLLM rollouts and the
  importance-sampling correction NeMo-RL recommends for FP8 rollouts
  (its ``grpo_math_8B_megatron_fp8.yaml``).
* Validation inside NeMo-RL is off: held-out selection accuracy and env evaluation are the
  core's (``nemo-act eval``), run on the exported HF checkpoint like the local engine's.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from nemo_act.config.schema import ExperimentConfig, GRPOStageConfig
from nemo_act.engines.nemo_rl.processors import PROCESSOR, STOP_STRINGS, task_name  # noqa: TID253
from nemo_act.engines.nemo_rl.settings import nemo_rl_settings
from nemo_act.stage_data import reward_values, stage_config
from nemo_act.stage_kinds import stage_kind

ROWS = "rows.jsonl"  # the stage's tagged rows in its folder (processors.tag_rows), what NeMo-RL's loader reads
DATASET = "nemo_act.engines.nemo_rl.datasets.StageRowsDataset"  # data.train.dataset_name (a dotted path)
# train.<block>.lr_scheduler values Megatron's scheduler knows by the same name (megatron_cfg.scheduler.lr_decay_style)
DECAY_STYLES = ("constant", "cosine", "linear")
_TOKEN_LEVEL = {"grpo": False, "dapo": True, "bnpo": True}
REWARD_LOG = "reward_parts.jsonl"  # per-step reward parts, written by the reward environment
FP8_BLOCK = 128  # TE blockwise FP8 (cuBLAS block size), NeMo-RL's models/megatron/data.py


def global_batch(kind: str, cfg: ExperimentConfig) -> int:
    """Sequences per optimizer step over the whole job (GRPO: completions)."""
    sc = stage_config(kind, cfg)
    return sc.batch_size * sc.grad_accum


def prompts_per_step(kind: str, cfg: ExperimentConfig) -> int:
    """Prompts per GRPO step: the global batch over G; an error when G does not divide it."""
    sc = stage_config(kind, cfg)
    assert isinstance(sc, GRPOStageConfig)
    batch = global_batch(kind, cfg)
    if batch % sc.num_generations:
        raise ValueError(
            f"train.{stage_kind(kind).train}: batch_size x grad_accum = {batch} is not a multiple of "
            f"num_generations = {sc.num_generations}"
        )
    return batch // sc.num_generations


def steps_per_epoch(kind: str, cfg: ExperimentConfig, n_rows: int) -> int:
    """Optimizer steps in one pass over ``n_rows`` rows, as NeMo-RL's loader makes them.

    NeMo-RL v0.7.0 builds the training loader with ``drop_last=True`` (``algorithms/grpo.py``,
    ``sft.py``, ``dpo.py``), so a partial last batch is never trained on: ``floor(rows / per step)``.

    Raises:
        ValueError: The stage has fewer rows than one step takes (NeMo-RL would train 0 steps).
    """
    sc = stage_config(kind, cfg)
    rows = min(n_rows, sc.max_samples) if sc.max_samples is not None else n_rows
    per_step = prompts_per_step(kind, cfg) if stage_kind(kind).algorithm == "grpo" else global_batch(kind, cfg)
    what = "prompts" if stage_kind(kind).algorithm == "grpo" else "sequences"
    if rows < per_step:
        raise ValueError(
            f"stage {kind}: {rows} training rows, fewer than one optimizer step takes ({per_step} {what}: "
            f"train.{stage_kind(kind).train}.batch_size x grad_accum"
            f"{' / num_generations' if what == 'prompts' else ''}); "
            "NeMo-RL drops a partial batch, so it would train 0 steps. Lower the batch or add data."
        )
    return rows // per_step


def total_steps(kind: str, cfg: ExperimentConfig, n_rows: int) -> int:
    """Optimizer steps of a stage: ``max_steps``, or ``floor(epochs x steps per epoch)`` (at least 1).

    The count NeMo-RL will really run, so the learning-rate schedule (``lr_decay_iters``) ends with the
    stage and a cosine decay reaches its floor.
    """
    sc = stage_config(kind, cfg)
    per_epoch = steps_per_epoch(kind, cfg, n_rows)
    if sc.max_steps > 0:
        return sc.max_steps
    return max(1, int(sc.epochs * per_epoch))


def _policy(kind: str, cfg: ExperimentConfig, init: str, steps: int, max_len: int) -> dict[str, Any]:
    n, sc = nemo_rl_settings(cfg), stage_config(kind, cfg)
    if cfg.model.finetune is not None:
        raise ValueError(
            "model.finetune is the local engine's (gradient checkpointing, top layers); the cluster engine recomputes "
            "with engine.nemo_rl.megatron.activation_checkpointing (set by the layouts) and trains every layer: "
            "set model.finetune=null"
        )
    mg = n.megatron
    if sc.lr_scheduler not in DECAY_STYLES:
        block = stage_kind(kind).train
        known = ", ".join(DECAY_STYLES)
        raise ValueError(f"train.{block}.lr_scheduler '{sc.lr_scheduler}': the cluster engine knows {known}")
    fp8 = n.precision == "fp8"
    kwargs = None if cfg.model.enable_thinking is None else {"enable_thinking": cfg.model.enable_thinking}
    divisible = mg.tensor_parallel * (2 * mg.context_parallel if mg.context_parallel > 1 else 1)
    megatron: dict[str, Any] = {
        "enabled": True,
        "tensor_model_parallel_size": mg.tensor_parallel,
        "pipeline_model_parallel_size": mg.pipeline_parallel,
        "context_parallel_size": mg.context_parallel,
        "expert_model_parallel_size": mg.expert_parallel,
        **({"expert_tensor_parallel_size": mg.expert_tensor_parallel} if mg.expert_tensor_parallel else {}),
        "sequence_parallel": mg.sequence_parallel,
        "activation_checkpointing": mg.activation_checkpointing,
        "pipeline_dtype": "bfloat16",
        "optimizer": {
            "lr": sc.learning_rate,
            "min_lr": sc.learning_rate if sc.lr_scheduler == "constant" else 0.0,
            "weight_decay": sc.weight_decay,
            "clip_grad": sc.max_grad_norm,  # the SFT base sets 0 (no clipping)
            "use_distributed_optimizer": mg.distributed_optimizer,
            # NeMo-RL's FP8 recipe turns the precision-aware optimizer off
            **({"use_precision_aware_optimizer": False} if fp8 else {}),
        },
        "scheduler": {
            "lr_decay_style": sc.lr_scheduler,
            "lr_decay_iters": steps,
            "lr_warmup_iters": int(sc.warmup_ratio * steps),
            "lr_warmup_init": 0.0,
            "start_weight_decay": sc.weight_decay,
            "end_weight_decay": sc.weight_decay,
        },
        "fp8_cfg": {"enabled": fp8, "fp8": "e4m3", "fp8_recipe": "blockwise", "fp8_param": False},
    }
    if fp8:
        megatron["env_vars"] = {"NVTE_FP8_BLOCK_SCALING_FP32_SCALES": "1"}
    return {
        "model_name": init,
        "tokenizer": {"name": init, "chat_template": "default", "chat_template_kwargs": kwargs},
        "train_global_batch_size": global_batch(kind, cfg),
        "max_grad_norm": sc.max_grad_norm or None,  # the SFT and DPO bases leave it null
        "train_micro_batch_size": n.micro_batch_size,
        "logprob_batch_size": n.micro_batch_size,
        "max_total_sequence_length": max_len,
        "precision": "bfloat16",
        "make_sequence_length_divisible_by": divisible,
        "dtensor_cfg": {"enabled": False},
        "optimizer": None,  # Megatron has its own (megatron_cfg.optimizer)
        "scheduler": None,
        "megatron_cfg": megatron,
    }


def _loop(kind: str, cfg: ExperimentConfig, steps: int, n_rows: int) -> dict[str, Any]:
    """The algorithm section's loop keys (same names in NeMo-RL's grpo, sft and dpo sections).

    Enough epochs that NeMo-RL stops at ``max_num_steps``, never at an epoch boundary before it.
    """
    return {
        "max_num_epochs": math.ceil(steps / steps_per_epoch(kind, cfg, n_rows)),
        "max_num_steps": steps,
        "seed": cfg.seed,
        "val_period": 0,  # held-out selection and env eval are the core's, on the exported checkpoint
        "val_at_start": False,
        "val_at_end": False,
    }


JOB_END_ENV = "NEMO_ACT_JOB_END"  # the Slurm job's end, Unix seconds (slurm/_act_job.sh exports it)


def must_save_by(margin_s: int, now: float | None = None) -> str | None:
    """NeMo-RL's ``checkpointing.checkpoint_must_save_by`` for a stage starting ``now``; None outside a job.

    NeMo-RL's ``TimeoutChecker`` (``nemo_rl/utils/timer.py``) reads it as ``DD:HH:MM:SS`` after the start
    of training and saves once the next step would pass it (``grpo.py:2880``, also SFT and DPO). It is the
    time left in the job (``$NEMO_ACT_JOB_END``) less ``margin_s`` (the requeue margin plus a save), at
    least 0: a job that starts a stage with less left saves after its first step.
    """
    end = os.environ.get(JOB_END_ENV)
    if not end:
        return None
    left = max(0, int(float(end) - (time.time() if now is None else now)) - margin_s)
    days, rest = divmod(left, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days:02d}:{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _common(kind: str, cfg: ExperimentConfig, out: Path) -> dict[str, Any]:
    n = nemo_rl_settings(cfg)
    return {
        "checkpointing": {
            "enabled": True,
            "checkpoint_dir": str(out / "checkpoints"),  # the runner's resume marker, as for the local engine
            "save_period": n.save_period,
            "metric_name": None,  # no in-loop validation: keep the newest
            "keep_top_k": 2,
            "checkpoint_must_save_by": must_save_by(n.save_deadline_margin_s),  # the driver renews it at train
        },
        "logger": {
            "log_dir": str(out / "nemo_rl" / "logs"),
            "tensorboard_enabled": True,  # always: the driver reads the stage's metrics.jsonl from these logs
            "wandb_enabled": "wandb" in cfg.train.report_to,
            "wandb": {"project": "nemo-act", "name": f"{cfg.pipeline.name}/{out.name}"},
            "monitor_gpus": True,
            "num_val_samples_to_print": 0,
        },
        "cluster": {"num_nodes": n.cluster.num_nodes, "gpus_per_node": n.cluster.gpus_per_node},
        "data": _data(kind, out),
    }


def _data(kind: str, out: Path) -> dict[str, Any]:
    """NeMo-RL's ``data`` section: our dataset class (dotted path) over the stage's rows file.

    With our processor and reward env (``nemo_rl/data/datasets/response_datasets/__init__.py``
    ``load_response_dataset``), and no validation split (held-out selection and env evaluation are
    the core's).
    """
    train: dict[str, Any] = {"dataset_name": DATASET, "data_path": str(out / ROWS)}
    if stage_kind(kind).algorithm != "dpo":  # DPO rows go through NeMo-RL's own preference_preprocessor
        train["processor"] = PROCESSOR
    if stage_kind(kind).reward is not None:
        train["env_name"] = task_name(kind)
    # No ``default`` key (master_config drops the base's too): NeMo-RL's ``setup_preference_data`` merges
    # ``data.default`` whenever the key exists, None included (``nemo_rl/data/utils.py:314-315``: DPO stages
    # crashed on ``default: None``), and a base's defaults (GRPO's math prompt file) are not ours.
    return {"train": train, "validation": None, "shuffle": True, "use_multiple_dataloader": False}


def _grpo(kind: str, cfg: ExperimentConfig, init: str, out: Path, n_rows: int) -> dict[str, Any]:
    n = nemo_rl_settings(cfg)
    sc = stage_config(kind, cfg)
    assert isinstance(sc, GRPOStageConfig)
    if sc.loss_type not in _TOKEN_LEVEL:
        block = stage_kind(kind).train
        raise ValueError(f"train.{block}.loss_type '{sc.loss_type}': the cluster engine knows {sorted(_TOKEN_LEVEL)}")
    steps = total_steps(kind, cfg, n_rows)
    fp8 = n.precision == "fp8"
    policy = _policy(kind, cfg, init, steps, n.max_total_sequence_length)
    policy["generation"] = {
        "backend": "vllm",
        "temperature": sc.temperature,
        "top_p": sc.top_p,
        "top_k": None,
        "max_new_tokens": sc.max_completion_length,
        "stop_strings": list(STOP_STRINGS),
        "vllm_cfg": {
            "tensor_parallel_size": n.vllm.tensor_parallel,
            "gpu_memory_utilization": n.vllm.gpu_memory_utilization,
            "max_model_len": n.max_total_sequence_length,
            "precision": "fp8" if fp8 else "bfloat16",
            "use_deep_gemm": fp8,
        },
        **({"vllm_kwargs": dict(n.vllm_kwargs)} if n.vllm_kwargs else {}),
    }
    reward = str(stage_kind(kind).reward)
    return {
        "grpo": {
            "num_prompts_per_step": prompts_per_step(kind, cfg),
            "num_generations_per_prompt": sc.num_generations,
            "max_rollout_turns": 1,
            "normalize_rewards": True,  # (r - baseline) / std, as TRL's scale_rewards="group"
            "use_leave_one_out_baseline": sc.baseline == "leave_one_out",
            "adv_estimator": {"use_leave_one_out_baseline": sc.baseline == "leave_one_out"},
            **_loop(kind, cfg, steps, n_rows),
        },
        "loss_fn": {
            "reference_policy_kl_penalty": sc.beta,
            "ratio_clip_min": sc.epsilon,
            "ratio_clip_max": sc.epsilon,
            "token_level_loss": _TOKEN_LEVEL[sc.loss_type],
            "use_importance_sampling_correction": fp8,
        },
        "policy": policy,
        "env": {
            task_name(kind): {
                "reward": reward,  # which score (the generic actor of a registered reward imports the extensions)
                "extensions": list(cfg.extensions),
                "values": reward_values(reward, cfg).model_dump(),
                "use_admissible": cfg.benchmark.admissible_reward,
                "log_path": str(out / REWARD_LOG),
                "stage": out.name,
                "zero_variance_steps": sc.zero_variance_steps,
            },
            # v0.7.0 grpo_train dumps every sample's tokens to train_data_step<N>.jsonl each step unless
            # this is set (algorithms/grpo.py _should_log_nemo_gym_responses): hundreds of MB per step here
            "should_log_nemo_gym_responses": not n.dump_train_data,
        },
        **_common(kind, cfg, out),
    }


def _supervised(kind: str, cfg: ExperimentConfig, init: str, out: Path, n_rows: int) -> dict[str, Any]:
    """What an SFT and a DPO stage share: the policy over the stage's step count, and the common keys."""
    sc = stage_config(kind, cfg)
    steps = total_steps(kind, cfg, n_rows)
    return {
        "policy": _policy(kind, cfg, init, steps, sc.max_length),  # type: ignore[attr-defined]
        **_common(kind, cfg, out),
    }


def _sft(kind: str, cfg: ExperimentConfig, init: str, out: Path, n_rows: int) -> dict[str, Any]:
    """An SFT stage: :func:`_supervised` and the ``sft`` loop."""
    return _supervised(kind, cfg, init, out, n_rows) | {"sft": _loop(kind, cfg, total_steps(kind, cfg, n_rows), n_rows)}


def _dpo(kind: str, cfg: ExperimentConfig, init: str, out: Path, n_rows: int) -> dict[str, Any]:
    """A DPO stage: :func:`_supervised` with packing and dynamic batching off, and the ``dpo`` loop and loss."""
    sc = stage_config(kind, cfg)
    overlay = _supervised(kind, cfg, init, out, n_rows)
    # algorithms/dpo.py asserts both off (chosen/rejected must stay side by side in a batch)
    overlay["policy"] |= {"sequence_packing": {"enabled": False}, "dynamic_batching": {"enabled": False}}
    section = _loop(kind, cfg, total_steps(kind, cfg, n_rows), n_rows)
    section |= {"reference_policy_kl_penalty": sc.beta, "preference_loss_weight": 1, "sft_loss_weight": 0}  # type: ignore[attr-defined]
    return overlay | {"dpo": section}


def stage_overlay(kind: str, cfg: ExperimentConfig, *, init: str, out: str | Path, n_rows: int) -> dict[str, Any]:
    """Our settings of one stage as nested NeMo-RL config keys (layer 2 above).

    Args:
        kind: A stage kind (:data:`~nemo_act.stage_kinds.STAGE_KINDS`; its ``algorithm`` picks GRPO, SFT or DPO).
        cfg: The experiment config (``engine.nemo_rl`` must be set).
        init: HF checkpoint the stage starts from (also its tokenizer).
        out: The stage's output folder: NeMo-RL checkpoints in ``out/checkpoints``, its logs in
            ``out/nemo_rl/logs``, reward parts in ``out/reward_parts.jsonl``.
        n_rows: Training rows of the stage (sets the step count when ``max_steps`` is -1).

    Returns:
        A nested dict to merge over the NeMo-RL base config.
    """
    build = {"grpo": _grpo, "sft": _sft, "dpo": _dpo}[stage_kind(kind).algorithm]
    return build(kind, cfg, init, Path(out), n_rows)


def master_config(
    kind: str, cfg: ExperimentConfig, base: dict[str, Any], *, init: str, out: str | Path, n_rows: int
) -> dict[str, Any]:
    """The full NeMo-RL config of a stage: ``base`` + :func:`stage_overlay` + ``engine.nemo_rl.overrides``.

    Args:
        kind: Stage kind.
        cfg: The experiment config.
        base: The release's example config for the stage's algorithm, as a plain (unresolved or
            resolved) dict; ``{}`` renders our part alone.
        init: HF checkpoint the stage starts from.
        out: The stage's output folder.
        n_rows: Training rows of the stage.

    Returns:
        The merged config as a nested dict (the base's ``${...}`` interpolations kept as written).
    """
    overlay = stage_overlay(kind, cfg, init=init, out=out, n_rows=n_rows)
    merged = OmegaConf.merge(OmegaConf.create(base), overlay)
    for key, value in overlay["data"].items():  # the base's dataset entries are replaced, not merged into ours
        merged.data[key] = value
    if "default" in merged.data:  # nor filled in from its defaults (see _data): the key goes
        del merged.data["default"]
    if nemo_rl_settings(cfg).precision == "fp8" and not OmegaConf.select(merged, "policy.sequence_packing.enabled"):
        # TE blockwise FP8 needs each rank's sequence length divisible by 128. NeMo-RL pads the packed sequence
        # to 128 x TP(SP) x 2CP itself (models/megatron/data.py:1142-1160), so only a stage that does not pack
        # (DPO: algorithms/dpo.py:151 asserts it off; a base without packing) pads each sequence that far.
        merged.policy.make_sequence_length_divisible_by = merged.policy.make_sequence_length_divisible_by * FP8_BLOCK
    for dotted, value in nemo_rl_settings(cfg).overrides.items():
        OmegaConf.update(merged, dotted, value, merge=False)
    tree = OmegaConf.to_container(merged, resolve=False)
    assert isinstance(tree, dict)
    return tree
