"""Run one cluster-engine stage for the pipeline runner (engine-free: subprocesses and files).

A stage is two processes, so Ray, CUDA and Megatron state never leak from one stage into the next:

1. the driver (``python -m nemo_act.engines.nemo_rl.driver``), which trains with NeMo-RL and
   writes Megatron checkpoints to ``<out>/checkpoints/step_<N>`` (NeMo-RL resumes from the newest
   one when the stage is run again, e.g. after a Slurm requeue) and ``<out>/metrics.jsonl``;
2. the export (``tools/convert/megatron_to_hf.py``, Megatron-Bridge), which turns the newest
   checkpoint into an HF folder in ``<out>`` itself, so the stage folder is the next stage's ``init``
   exactly as with the local engine.

Inputs are handed over as files in ``<out>``: ``experiment.yaml`` (the resolved experiment config)
and ``rows.jsonl`` (the stage rows). Set ``NEMO_ACT_DRY_RUN=1`` to print both commands instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from nemo_act.config.load import to_yaml
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import write_text_atomic

REPO = Path(__file__).resolve().parents[3]
CONVERT = REPO / "tools" / "convert"
EXPORT_TOOL = CONVERT / "megatron_to_hf.py"
_STEP = re.compile(r"^step_(\d+)$")
# NeMo-RL metric names -> the names the local engine (TRL) logs, so `nemo-act report` plots both.
METRIC_ALIASES = {"train/loss": "loss", "train/reward": "reward"}
REWARD_ALIASES = {
    "accuracy": "rewards/accuracy/mean",
    "admissible": "rewards/admissible/mean",
    "format": "rewards/format/mean",
    "selection_accuracy": "rewards/selection_accuracy/mean",
    "named_neither": "rewards/named_neither/mean",
    "malformed": "rewards/malformed/mean",
}


def driver_command(kind: str, init: str, out: Path) -> list[str]:
    """The driver process of a stage (reads ``out/experiment.yaml`` and ``out/rows.jsonl``)."""
    return [
        sys.executable, "-m", "nemo_act.engines.nemo_rl.driver",
        "--stage", kind, "--init", init, "--config", str(out / "experiment.yaml"),
        "--rows", str(out / "rows.jsonl"), "--out", str(out),
    ]  # fmt: skip


def export_command(weights: Path, init: str, out: Path) -> list[str]:
    """The Megatron -> HF export of a stage's final weights (architecture and tokenizer from ``init``)."""
    return [sys.executable, str(EXPORT_TOOL), "--megatron-ckpt", str(weights), "--hf-ref", init, "--out", str(out)]


def latest_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The newest finished NeMo-RL checkpoint (``step_<N>``; unfinished ones are ``tmp_step_<N>``)."""
    steps = [(int(m.group(1)), p) for p in checkpoint_dir.glob("step_*") if (m := _STEP.match(p.name)) and p.is_dir()]
    return max(steps)[1] if steps else None


def megatron_weights(step_dir: Path) -> Path:
    """The Megatron checkpoint inside a NeMo-RL step folder (``policy/weights[/iter_*]``)."""
    weights = step_dir / "policy" / "weights"
    iters = sorted(weights.glob("iter_*"))
    return iters[-1] if iters else weights


def stage_metrics(scalars: dict[int, dict[str, float]], reward_log: Path | None, kind: str) -> list[dict[str, Any]]:
    """One metrics line per step: NeMo-RL's scalars, their local-engine names, and the reward parts.

    Args:
        scalars: step -> NeMo-RL metric name -> value (from its TensorBoard log).
        reward_log: The reward environment's JSONL (one line per GRPO step), or None.
        kind: Stage kind (written into every line, as the local engine does).

    Returns:
        Lines sorted by step.
    """
    parts: dict[int, dict[str, float]] = {}
    if reward_log is not None and reward_log.exists():
        for line in reward_log.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                parts[int(rec["call"])] = {REWARD_ALIASES[k]: v for k, v in rec.items() if k in REWARD_ALIASES}
    lines = []
    for step in sorted(set(scalars) | set(parts)):
        row: dict[str, Any] = dict(scalars.get(step, {}))
        row.update({alias: row[name] for name, alias in METRIC_ALIASES.items() if name in row})
        row.update(parts.get(step, {}))
        lines.append({**row, "step": step, "stage": kind})
    return lines


def stage_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a stage's processes, with our Megatron-Bridge bridges importable everywhere.

    ``tools/convert`` and its ``autoregister`` folder lead ``PYTHONPATH``, so every process that
    imports Megatron-Bridge, NeMo-RL's Ray workers included (they inherit the driver's environment),
    also registers our Olmo-2/3 bridges.
    """
    env = dict(os.environ if base is None else base)
    paths = [str(CONVERT / "autoregister"), str(CONVERT)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _run(cmd: list[str]) -> None:
    print("+ " + " ".join(cmd), flush=True)
    if os.environ.get("NEMO_ACT_DRY_RUN") == "1":
        return
    subprocess.run(cmd, check=True, env=stage_env())


def run_driver(kind: str, init: str, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: str | Path) -> Path:
    """Hand the stage's inputs over as files in ``out`` and run the NeMo-RL driver on them (no export).

    Returns:
        ``out``, now holding NeMo-RL's checkpoints, logs and ``metrics.jsonl``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "experiment.yaml", to_yaml(cfg))
    write_text_atomic(out / "rows.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    _run(driver_command(kind, init, out))
    return out


def train_stage(kind: str, init: str, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: str | Path) -> Path:
    """Train one stage on the cluster engine and leave an HF checkpoint in ``out``.

    Args:
        kind: Stage kind.
        init: HF checkpoint to start from.
        rows: Stage rows.
        cfg: Experiment config (``engine.nemo_rl`` set).
        out: Stage folder.

    Returns:
        ``out``, an HF checkpoint folder (weights, config, tokenizer), plus ``config.yaml`` and
        ``metrics.jsonl`` as the local engine writes them.

    Raises:
        RuntimeError: The driver finished without a checkpoint.
    """
    out = run_driver(kind, init, rows, cfg, out)
    if os.environ.get("NEMO_ACT_DRY_RUN") == "1":
        _run(export_command(out / "checkpoints" / "step_N" / "policy" / "weights", init, out / "hf.partial"))
        return out
    step = latest_checkpoint(out / "checkpoints")
    if step is None:
        raise RuntimeError(f"stage {kind}: the NeMo-RL driver left no checkpoint in {out / 'checkpoints'}")
    partial = out / "hf.partial"
    shutil.rmtree(partial, ignore_errors=True)
    _run(export_command(megatron_weights(step), init, partial))
    for item in partial.iterdir():  # the HF files land in the stage folder itself
        os.replace(item, out / item.name)
    partial.rmdir()
    write_text_atomic(out / "config.yaml", to_yaml(cfg))
    return out
