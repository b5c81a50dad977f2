"""Local training stages on TRL: every stage kind, by its ``algorithm`` (GRPO, SFT or DPO trainer).

GRPOTrainer: ACT and its variants, RL; SFTTrainer: IL, IL at ACT's budget, SFT-on-choice, the reflection baselines;
DPOTrainer: DPO.

A stage reads an HF checkpoint, trains on the rows built by :mod:`nemo_act.stage_data`, and writes
an HF checkpoint (safetensors + tokenizer) with ``config.yaml`` (the resolved experiment config) and
``metrics.jsonl`` (TRL's log history: loss, reward parts, selection accuracy...; also TensorBoard / W&B
when ``train.report_to`` asks). While it trains it shows one bar (:mod:`nemo_act.engines.local.progress`).
TRL checkpoints go to ``<out>/checkpoints`` every ``save_steps``; a crashed stage resumes from the last one.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any
from unittest import mock

from nemo_act.config.load import to_yaml
from nemo_act.config.schema import (
    ExperimentConfig,
)
from nemo_act.data.io import follow_umask, write_text_atomic
from nemo_act.engines.local.exact_resume import resumable  # noqa: TID253
from nemo_act.engines.local.progress import use_stage_bar  # noqa: TID253
from nemo_act.engines.local.reward_funcs import reward_funcs
from nemo_act.generation.hf import resolve_device
from nemo_act.stage_data import stage_config
from nemo_act.stage_kinds import stage_kind


def _common_args(sc: Any, cfg: ExperimentConfig, out: Path) -> dict[str, Any]:
    device = resolve_device(cfg.generation.device)
    ft = cfg.model.finetune
    return {
        "output_dir": str(out / "checkpoints"),
        "num_train_epochs": sc.epochs,
        "max_steps": sc.max_steps,
        "learning_rate": sc.learning_rate,
        "lr_scheduler_type": sc.lr_scheduler,
        "warmup_steps": sc.warmup_ratio,  # transformers reads a value < 1 as a ratio of the steps
        "weight_decay": sc.weight_decay,
        "max_grad_norm": sc.max_grad_norm,
        "per_device_train_batch_size": sc.batch_size,
        "gradient_accumulation_steps": sc.grad_accum,
        "logging_steps": sc.logging_steps,
        "save_steps": sc.save_steps,
        "save_total_limit": 1,
        "seed": cfg.seed,
        "report_to": list(cfg.train.report_to),
        "run_name": f"{cfg.pipeline.name}/{out.name}",
        "use_cpu": device == "cpu",
        "bf16": device != "cpu" and cfg.model.dtype == "bfloat16",
        "fp16": device != "cpu" and cfg.model.dtype == "float16",
        "activation_checkpointing": ft is not None and ft.gradient_checkpointing,
        # non-reentrant: a segment whose inputs need no grad (frozen lower layers, model.finetune.top_layers) still
        # back-propagates into its own weights
        "activation_checkpointing_kwargs": {"use_reentrant": False},
    }


def freeze_below(model: Any, top: int) -> None:
    """Train only the top ``top`` decoder layers, the final norm and an untied output head; freeze the rest.

    The embeddings stay frozen, and with them an output head tied to them (SmolLM2's): backward then stops at the
    lowest trained layer, which is where the time goes.

    Args:
        model: A causal LM whose decoder has ``layers`` and ``norm`` (Llama, Qwen3, Olmo families).
        top: How many of the top decoder layers train.

    Raises:
        ValueError: The model has fewer layers than ``top``, or no decoder layers where transformers keeps them.
    """
    decoder = model.get_decoder()
    layers = getattr(decoder, "layers", None)
    if layers is None or not hasattr(decoder, "norm"):
        raise ValueError(f"model.finetune.top_layers: {type(model).__name__} keeps no decoder layers and norm")
    if top > len(layers):
        raise ValueError(f"model.finetune.top_layers={top}: the model has {len(layers)} decoder layers")
    model.requires_grad_(False)
    for module in [*layers[len(layers) - top :], decoder.norm]:
        module.requires_grad_(True)
    head = model.get_output_embeddings()
    if head is not None and head.weight is not model.get_input_embeddings().weight:
        head.requires_grad_(True)


def _template_kwargs(cfg: ExperimentConfig) -> dict[str, Any]:
    return {} if cfg.model.enable_thinking is None else {"enable_thinking": cfg.model.enable_thinking}


def _load(init: str, cfg: ExperimentConfig):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(init)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype: Any = "auto" if cfg.model.dtype == "auto" else getattr(torch, cfg.model.dtype)
    if resolve_device(cfg.generation.device) == "cpu" and dtype in (torch.bfloat16, torch.float16):
        dtype = torch.float32  # CPU training in half precision is slow and lossy
    model = AutoModelForCausalLM.from_pretrained(init, dtype=dtype)
    return model, tok


def _finished(ckpt: Path) -> bool:
    """A TRL checkpoint that was written whole: transformers writes ``trainer_state.json`` last."""
    try:
        json.loads((ckpt / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return True


def _last_checkpoint(out: Path) -> str | None:
    """The newest whole checkpoint: a kill while one is being written leaves it partial, so it is skipped."""
    ckpts = sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    whole = [c for c in ckpts if _finished(c)]
    for partial in set(ckpts) - set(whole):
        shutil.rmtree(partial, ignore_errors=True)  # or TRL's checkpoint rotation trips over it later
    return str(whole[-1]) if whole else None


def _trainer(kind: str, model, tok, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: Path):
    from datasets import Dataset

    sc = stage_config(kind, cfg)
    if not rows:
        raise ValueError(f"stage '{kind}': no training rows")
    with_kwargs = [dict(r, chat_template_kwargs=_template_kwargs(cfg)) for r in rows] if _template_kwargs(cfg) else rows
    common = _common_args(sc, cfg, out)
    spec = stage_kind(kind)
    algorithm = spec.algorithm
    if algorithm == "grpo":
        from trl import GRPOConfig, GRPOTrainer

        if sc.baseline != "group_mean":
            raise ValueError(
                f"train.{stage_kind(kind).train}.baseline={sc.baseline}: TRL's GRPOTrainer subtracts the group "
                "mean only; "
                "use group_mean on the local engine (engine=nemo_rl has leave_one_out)"
            )
        funcs, weights = reward_funcs(str(spec.reward), cfg)
        args = GRPOConfig(
            **common,
            num_generations=sc.num_generations,
            beta=sc.beta,
            epsilon=sc.epsilon,
            loss_type=sc.loss_type,
            scale_rewards="group",  # (r - group mean) / group std: what NeMo-RL's normalize_rewards does
            max_completion_length=sc.max_completion_length,
            temperature=sc.temperature,
            top_p=sc.top_p,
            reward_weights=weights,
            chat_template_kwargs=_template_kwargs(cfg) or None,
        )
        from nemo_act.engines.local.signal_check import ZeroVarianceWatch

        return resumable(GRPOTrainer)(
            model=model,
            reward_funcs=funcs,
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
            callbacks=[ZeroVarianceWatch(kind, sc.zero_variance_steps)],
        )
    if algorithm == "sft":
        from trl import SFTConfig, SFTTrainer

        args = SFTConfig(**common, max_length=sc.max_length, completion_only_loss=True)
        return resumable(SFTTrainer)(
            model=model, args=args, train_dataset=Dataset.from_list(with_kwargs), processing_class=tok
        )
    from trl import DPOConfig, DPOTrainer

    args = DPOConfig(**common, max_length=sc.max_length, beta=sc.beta)
    return resumable(DPOTrainer)(
        model=model, args=args, train_dataset=Dataset.from_list(with_kwargs), processing_class=tok
    )


class _TiedWeightsFilter(logging.Filter):
    """Drops transformers' resume warning when the only "missing" keys are weights tied to another.

    A checkpoint of a model with tied embeddings stores ``embed_tokens.weight`` once; loading it for a resume
    reports ``lm_head.weight`` missing although the tie restores it (Trainer ties after loading), so every resume
    printed an alarming but harmless line. Any other missing key is still reported.
    """

    PREFIX = "There were missing keys in the checkpoint model loaded: "

    def __init__(self, tied: set[str]) -> None:
        super().__init__()
        self.tied = tied

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if not msg.startswith(self.PREFIX):
            return True
        try:
            keys = set(ast.literal_eval(msg[len(self.PREFIX) :].rstrip(".")))
        except (ValueError, SyntaxError):
            return True
        return not (keys and keys <= self.tied)


@contextlib.contextmanager
def _quiet_tied_weights(model: Any):
    """Within the block, transformers' trainer does not warn about tied weights missing from a checkpoint."""
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})  # the ties transformers applies to this model
    logger = logging.getLogger("transformers.trainer")
    flt = _TiedWeightsFilter(tied)
    logger.addFilter(flt)
    try:
        yield
    finally:
        logger.removeFilter(flt)


def train_stage(kind: str, init: str, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: str | Path) -> Path:
    """Train one stage and save an HF checkpoint.

    Args:
        kind: A stage kind (:data:`~nemo_act.stage_kinds.STAGE_KINDS`).
        init: HF checkpoint to start from (hub name or folder).
        rows: Stage rows (:mod:`nemo_act.stage_data`), built with :func:`stage_experiment`'s config.
        cfg: Experiment config (``train.<kind>`` hyperparameters, rewards, model settings).
        out: Output folder; ``<out>/checkpoints`` holds resumable TRL checkpoints.

    Returns:
        The output folder, a loadable HF checkpoint.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model, tok = _load(init, cfg)
    if cfg.model.finetune is not None and cfg.model.finetune.top_layers is not None:
        freeze_below(model, cfg.model.finetune.top_layers)
    # TensorBoard (train.report_to) writes beside the checkpoint, not under checkpoints/ (removed when done);
    # its callback reads the variable when the trainer is built
    with mock.patch.dict(os.environ, {"TENSORBOARD_LOGGING_DIR": str(out / "tensorboard")}):
        trainer = _trainer(kind, model, tok, rows, cfg, out)
        use_stage_bar(trainer, out.name)
        with _quiet_tied_weights(trainer.model):
            trainer.train(resume_from_checkpoint=_last_checkpoint(out))
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))
    write_text_atomic(out / "config.yaml", to_yaml(cfg))
    history = [dict(h, stage=kind) for h in trainer.state.log_history]
    write_text_atomic(out / "metrics.jsonl", "".join(json.dumps(h) + "\n" for h in history))
    follow_umask(out)  # the weights too (safetensors writes them 0600)
    return out
