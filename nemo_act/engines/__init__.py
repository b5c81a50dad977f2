"""Training engines over the shared core: ``local`` (HF + TRL) and ``nemo_rl`` (cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nemo_act.config.schema import ExperimentConfig


def train_stage(kind: str, init: str, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: str | Path) -> Path:
    """Train one stage on ``cfg.engine.name``'s engine; the result is an HF checkpoint folder.

    Args:
        kind: Stage kind.
        init: HF checkpoint to start from.
        rows: Stage rows (:mod:`nemo_act.stage_data`).
        cfg: Experiment config.
        out: Stage folder.
    """
    if cfg.engine.name == "nemo_rl":
        from nemo_act.engines.nemo_rl.launch import train_stage as cluster_stage

        return cluster_stage(kind, init, rows, cfg, out)
    from nemo_act.engines.local.stages import train_stage as local_stage

    return local_stage(kind, init, rows, cfg, out)
