"""The shared start of ``nemo-act demo`` and ``nemo-act bench``: experts, the tiny model, the warm-up checkpoint.

1. Gold experts of ``pipeline.experts`` (and the held-out ones of ``pipeline.heldout``) in the data folder.
2. With ``model.tiny`` set (a model built here, not downloaded), a tiny random Qwen3 whose BPE tokenizer is trained
   on those experts, in ``<out>/tiny-model``.
3. A warm-up SFT of ``demo.warmup_steps`` steps, the stand-in for pretraining, so the model emits well-formed actions
   and answers a selection prompt by naming a candidate: expert actions (IL rows) mixed with selection prompts
   whose target is a coin-flip candidate (random-policy pairs; the target says nothing about which candidate is
   better). Its checkpoint is the initial policy every pipeline starts from. A pretrained model may skip it
   (``warmup_steps: 0``) or take it on other tasks' experts (``demo.warmup_experts``), IL rows only
   (``format_pairs_k: 0``): the answer formats, not the scored tasks.

Each step is reused when its inputs are unchanged (the pipeline runner's cache).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import read_jsonl
from nemo_act.data.records import Pair, Trajectory
from nemo_act.generation import RandomGenerator
from nemo_act.kinds.imitation import il_rows
from nemo_act.run.pipeline import PipelineRunner
from nemo_act.stage_data import selection_format_rows
from nemo_act.steps.pairs import collect_pairs
from nemo_act.tiny_model import build_tiny_model


@dataclass
class WarmStart:
    """What the warm-up made: the files every pipeline shares and the checkpoint they start from."""

    experts: Path
    heldout: Path
    init: str
    timings: dict[str, float] = field(default_factory=dict)


def warm_up(cfg: ExperimentConfig, out: Path, data: Path, console: Console) -> WarmStart:
    """Collect experts, build the tiny model where the config asks for one, and train (or reuse) the warm-up.

    Args:
        cfg: The config (``pipeline.experts``/``heldout``, ``model``, ``demo.warmup_steps``/``format_pairs_k``).
        out: Folder of the tiny model (``tiny-model``) and the warm-up run (``warmup``).
        data: Shared data folder (experts, format pairs).
        console: Where progress goes.

    Returns:
        The expert files, the warm-up checkpoint and the seconds each part took.
    """
    timings: dict[str, float] = {}
    t = time.time()
    console.rule(f"[bold]1. {cfg.benchmark.title} gold experts")
    base = PipelineRunner(cfg, out / "warmup", data_dir=data, console=console)
    experts = base.experts("experts")
    heldout = base.experts("heldout")
    source = cfg.demo.warmup_experts  # other tasks' experts: the formats without the scored tasks
    trained = source is not None and cfg.demo.warmup_steps > 0
    warm_experts = base.expert_file(source, data / "warmup_experts.jsonl") if trained else experts
    timings["experts"] = time.time() - t

    t = time.time()
    model = cfg.model.name_or_path
    if cfg.model.tiny is not None:
        model_dir = out / "tiny-model"
        if not (model_dir / "config.json").exists():
            console.rule("[bold]2. tiny Qwen3 + BPE tokenizer trained on the experts")
            build_tiny_model(model_dir, cfg.model.tiny, corpus=[experts])
        model = str(model_dir)
    timings["tiny model"] = time.time() - t

    t = time.time()
    init = model if cfg.demo.warmup_steps == 0 else _train_warm_up(cfg, model, warm_experts, out, data, console)
    timings["warm-up"] = time.time() - t
    return WarmStart(experts=experts, heldout=heldout, init=init, timings=timings)


def _train_warm_up(cfg: ExperimentConfig, model: str, experts: Path, out: Path, data: Path, console: Console) -> str:
    """Train the warm-up stage: IL rows of ``experts``, with coin-flip selection rows where ``format_pairs_k`` > 0."""
    console.rule("[bold]3. warm-up (the initial policy)")
    rows = il_rows(list(read_jsonl(experts, Trajectory)), cfg)
    made_from = experts
    if cfg.demo.format_pairs_k > 0:
        made_from = data / "format_pairs.jsonl"
        collect_pairs(experts, RandomGenerator(), cfg, made_from, k=cfg.demo.format_pairs_k)
        rows += selection_format_rows(list(read_jsonl(made_from, Pair)), cfg, cfg.seed)
    random.Random(cfg.seed).shuffle(rows)
    warm_train = cfg.train.model_copy(
        update={"il": cfg.train.il.model_copy(update={"max_steps": cfg.demo.warmup_steps})}
    )
    warm = PipelineRunner(cfg.model_copy(update={"train": warm_train}), out / "warmup", data_dir=data, console=console)
    return warm.run_stage(0, "il", model, {"experts": experts}, rows=rows, data=made_from)
