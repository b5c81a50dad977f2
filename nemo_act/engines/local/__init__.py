"""Local engine: one machine (CPU or one GPU), Hugging Face models trained with TRL; every step runs here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import model_validator

from nemo_act.config.schema import EngineConfigBase
from nemo_act.engines import Engine

LEGACY_KEYS = ("nemo_rl_release", "nemo_rl_commit", "nemo_rl_container", "nemo_rl")


class LocalEngineConfig(EngineConfigBase):
    """The local engine's ``engine`` block: its name; TRL's settings are the stages' ``train.<block>``."""

    @model_validator(mode="before")
    @classmethod
    def _before_engines_were_plugins(cls, value: Any) -> Any:
        """A run's config.yaml written before 2026-12-03 carries the NeMo-RL pin and ``nemo_rl: null``: unused here."""
        if isinstance(value, dict) and value.get("nemo_rl", None) is None:
            value = {k: v for k, v in value.items() if k not in LEGACY_KEYS}
        return value


CONFIG = LocalEngineConfig


class LocalEngine(Engine):
    """TRL's trainers in this process (:mod:`nemo_act.engines.local.stages`); data steps in this process too."""

    name = "local"
    isolates_steps = False
    trainer = "nemo_act.engines.local.stages:train_stage"

    def stage_started(self, stage: Path) -> bool:
        """A TRL checkpoint (``checkpoint-*``) the stage resumes from."""
        return any(stage.glob("checkpoint-*"))


ENGINE = LocalEngine()
