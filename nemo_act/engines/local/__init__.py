"""Local engine: one machine (CPU or one GPU), Hugging Face models trained with TRL; every step runs here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nemo_act.config.schema import ExperimentConfig
from nemo_act.engines import Engine


class LocalEngine(Engine):
    """TRL's trainers in this process (:mod:`nemo_act.engines.local.stages`); data steps in this process too."""

    name = "local"
    isolates_steps = False

    def train_stage(self, kind: str, init: str, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: Path) -> Path:
        """Train one stage with TRL (SFT, DPO or GRPO) into ``out``."""
        from nemo_act.engines.local.stages import train_stage

        return train_stage(kind, init, rows, cfg, out)

    def stage_started(self, stage: Path) -> bool:
        """A TRL checkpoint (``checkpoint-*``) the stage resumes from."""
        return any(stage.glob("checkpoint-*"))


ENGINE = LocalEngine()
