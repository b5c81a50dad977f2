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
from pathlib import Path
from typing import Any

from nemo_act.config.load import to_yaml
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import follow_umask, write_text_atomic
from nemo_act.engines import StageStopped
from nemo_act.engines.nemo_rl import interpreters
from nemo_act.engines.nemo_rl.processors import tag_rows  # noqa: TID253
from nemo_act.engines.nemo_rl.recipe import ROWS  # noqa: TID253

EXPORT_TOOL = interpreters.CONVERT / "megatron_to_hf.py"
STOPPED_EXIT = StageStopped.exit_code  # the driver's exit code for a stage stopped at its save deadline
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
    """The driver process of a stage (reads ``out/experiment.yaml`` and ``out/rows.jsonl``).

    Runs with the image's default Python (NeMo-RL, Ray), see :mod:`.interpreters`.
    """
    argv = [
        "-m", "nemo_act.engines.nemo_rl.driver",
        "--stage", kind, "--init", init, "--config", str(out / "experiment.yaml"),
        "--rows", str(out / ROWS), "--out", str(out),
    ]  # fmt: skip
    return interpreters.command("driver", argv)


def export_command(weights: Path, init: str, out: Path) -> list[str]:
    """The Megatron -> HF export of a stage's final weights (architecture and tokenizer from ``init``).

    Runs with NeMo-RL's Megatron worker venv (Megatron-Bridge), on CPU over gloo as NeMo-RL's own
    ``export_model_from_megatron`` does (``nemo_rl/models/megatron/community_import.py``). The export
    holds the weights in the HF folder's dtype (bf16: 2 bytes per parameter, docs/scaling.md), the logit
    check after it in float32 on both sides whatever the training precision.
    """
    argv = [str(EXPORT_TOOL), "--megatron-ckpt", str(weights), "--hf-ref", init, "--out", str(out), "--device", "cpu"]
    return interpreters.command("export", argv)


def latest_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The newest finished NeMo-RL checkpoint (``step_<N>``; unfinished ones are ``tmp_step_<N>``)."""
    steps = [(int(m.group(1)), p) for p in checkpoint_dir.glob("step_*") if (m := _STEP.match(p.name)) and p.is_dir()]
    return max(steps)[1] if steps else None


def checkpoint_step(step_dir: Path | None) -> int:
    """The step of a ``step_<N>`` folder (0 for None: a fresh stage)."""
    if step_dir is None:
        return 0
    m = _STEP.match(step_dir.name)
    if m is None:
        raise ValueError(f"{step_dir} is not a NeMo-RL step folder (step_<N>)")
    return int(m.group(1))


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


HF_IMPORT = Path("nemo_rl") / "hf_import"  # NeMo-RL's HF -> Megatron conversion of the stage's init


def stage_env(base: dict[str, str] | None = None, out: Path | None = None) -> dict[str, str]:
    """The environment of a stage's processes.

    :func:`.interpreters.child_env` (our code and bridges importable from every venv; NeMo-RL's Ray
    workers inherit the driver's environment), and, for a stage folder ``out``,
    ``NRL_MEGATRON_CHECKPOINT_DIR=<out>/nemo_rl/hf_import``: NeMo-RL v0.7.0 caches its HF -> Megatron
    conversion under that folder keyed by the model *path* (``models/megatron/setup.py``
    ``validate_model_paths``: ``model_<path>/iter_0000000`` exists -> "Skipping import"), so one shared
    cache would hand a stage retrained into the same folder, or after a killed conversion, old or
    partial weights. Per stage folder, it goes when the stage is retrained (the runner removes the folder).
    """
    env = interpreters.child_env(base)
    if out is not None:
        env["NRL_MEGATRON_CHECKPOINT_DIR"] = str(Path(out) / HF_IMPORT)
    return env


def _run(cmd: list[str], out: Path | None = None) -> None:
    print("+ " + " ".join(cmd), flush=True)
    if os.environ.get("NEMO_ACT_DRY_RUN") == "1":
        return
    subprocess.run(cmd, check=True, env=stage_env(out=out))


def stopped_short(checkpoints: Path, last: int) -> str | None:
    """What to say of a stage whose training returned with its newest checkpoint short of its ``last`` step, or None.

    NeMo-RL's loops return normally after the save the job's deadline asks for ("Timeout has been reached, stopping
    training early": ``nemo_rl/algorithms/grpo.py:3123-3126``, ``sft.py:646-648``, ``dpo.py:786-788`` at v0.7.0), so
    a return alone does not say the stage trained to its end; the newest ``step_<k>`` does.
    """
    step = checkpoint_step(latest_checkpoint(checkpoints))
    if step >= last:
        return None
    where = f"resumes from step_{step}" if step else "starts again: no checkpoint was written"
    return f"stopped at the save deadline after step {step} of {last}: requeued, {where} ({checkpoints})"


def run_driver(kind: str, init: str, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: str | Path) -> Path:
    """Hand the stage's inputs over as files in ``out`` and run the NeMo-RL driver on them (no export).

    A stage without a finished NeMo-RL checkpoint starts its HF -> Megatron conversion afresh: a
    conversion cut short (requeue, crash) never finished a training step, so nothing is lost. With one,
    the conversion finished before it (NeMo-RL converts before the first step) and is kept: the
    reference model of a resumed GRPO stage is loaded from it.

    Returns:
        ``out``, now holding NeMo-RL's checkpoints, logs and ``metrics.jsonl``.

    Raises:
        StageStopped: The driver stopped the stage at the job's save deadline (exit :data:`STOPPED_EXIT`).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if latest_checkpoint(out / "checkpoints") is None:
        shutil.rmtree(out / HF_IMPORT, ignore_errors=True)
    write_text_atomic(out / "experiment.yaml", to_yaml(cfg))
    tagged = tag_rows(kind, rows, cfg.model.enable_thinking)  # what NeMo-RL's loader reads (datasets.py)
    write_text_atomic(out / ROWS, "".join(json.dumps(r) + "\n" for r in tagged))
    try:
        _run(driver_command(kind, init, out), out)
    except subprocess.CalledProcessError as err:
        if err.returncode == STOPPED_EXIT:  # the driver said why on its log; nothing to export, nothing complete
            step = checkpoint_step(latest_checkpoint(out / "checkpoints"))
            raise StageStopped(
                f"stage {out.name} ({kind}) stopped at its save deadline after step {step}: nothing exported; "
                f"the same command resumes it from {out / 'checkpoints'}"
            ) from None
        raise
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
        StageStopped: The stage stopped at the job's save deadline: not exported, resumed by the next run.
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
    shutil.rmtree(out / HF_IMPORT, ignore_errors=True)  # a copy of init in Megatron format: not needed now
    write_text_atomic(out / "config.yaml", to_yaml(cfg))
    follow_umask(out)  # the exported weights too (safetensors writes them 0600)
    return out
