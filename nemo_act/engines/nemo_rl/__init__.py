"""Cluster engine on NeMo-RL (Ray) + Megatron-Core + vLLM.

Layering, so that what CI can run is most of it:

* ``processors`` (engine-free): stage rows of :mod:`nemo_act.stage_data` (the core's prompts) ->
  NeMo-RL ``DatumSpec`` / ``PreferenceDatumSpec``-shaped dicts with token ids from the model's own
  chat template.
* ``reward_env`` (engine-free): the ACT selection and RL action rewards as batched environments
  with NeMo-RL's ``EnvironmentInterface.step`` signature, returning each reward part as a column of
  a ``[B, 3]`` tensor (NeMo-RL v0.7.0 sums the columns into the total and logs each one).

The NeMo-RL-facing layer: ``environments`` (the ``EnvironmentInterface`` subclasses registered in NeMo-RL's
actor environment registry), ``recipe`` + ``driver`` + ``launch`` (a stage as a NeMo-RL job, exported to HF),
``interpreters`` (which venv of the image runs which step), ``preflight`` and ``layout`` (checks before a job).
NeMo-RL is pinned once in ``conf/engine/_nemo_rl_pin.yaml``; ``settings`` holds the model of the ``engine`` block
(:data:`CONFIG`). :data:`ENGINE` and :data:`CONFIG` are what the core sees of all this.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nemo_act.config.schema import ExperimentConfig
from nemo_act.engines import Check, Engine, PlannedStep
from nemo_act.engines.nemo_rl import interpreters, preflight
from nemo_act.engines.nemo_rl.layout import plan, print_plan
from nemo_act.engines.nemo_rl.settings import NeMoRLEngineConfig

CONFIG = NeMoRLEngineConfig


class NeMoRLEngine(Engine):
    """Each stage a NeMo-RL job on the Ray cluster (then exported to HF); GPU data steps in child processes."""

    name = "nemo_rl"
    isolates_steps = True
    trainer = "nemo_act.engines.nemo_rl.launch:train_stage"  # the stage's NeMo-RL job, its last checkpoint to HF

    def fingerprint(self, cfg: ExperimentConfig) -> dict[str, Any]:
        """Precision, the release's base configs and the raw overrides (not the layout: a job may be resized)."""
        n = cfg.engine.nemo_rl
        return {"engine": {"precision": n.precision, "bases": n.bases, "overrides": n.overrides}}

    def step_python(self, step: str, cfg: ExperimentConfig) -> str:
        """The image's venv for the step (vLLM's for generation with ``generation.backend=vllm``)."""
        spec = interpreters.step(step, cfg.generation.backend, cfg.benchmark.python_modules)
        return interpreters.python_for(spec.venv)

    def step_command(self, step: str, argv: Sequence[str], cfg: ExperimentConfig) -> list[str]:
        """The step's interpreter, checked for the modules it needs, then ``argv``."""
        return interpreters.command(step, argv, cfg.generation.backend, cfg.benchmark.python_modules)

    def step_env(self) -> dict[str, str] | None:
        """The child's environment with this checkout on its path (see ``interpreters.child_env``)."""
        return interpreters.child_env()

    def stage_plan(self, kind: str, init: str, rows_from: str, out: Path, cfg: ExperimentConfig) -> list[PlannedStep]:
        """The NeMo-RL driver's job, then the Megatron -> HF export of its last checkpoint."""
        ckpts = out / "checkpoints"
        return [
            PlannedStep(f"train {kind}", self.step_python("driver", cfg), f"{init}, {rows_from}", ckpts),
            PlannedStep(f"export {kind}", self.step_python("export", cfg), f"{ckpts}/step_<last>", out),
        ]

    def stage_log(self, stage: Path) -> str:
        """NeMo-RL's logs of the stage."""
        return str(stage / "nemo_rl" / "logs")

    def stage_started(self, stage: Path) -> bool:
        """A NeMo-RL checkpoint (``step_*``) the requeued job resumes from."""
        return any((stage / "checkpoints").glob("step_*"))

    def job_gpus(self, cfg: ExperimentConfig) -> int | None:
        """The recipe's GPUs (``engine.nemo_rl.cluster``), which the job's Ray cluster holds once every node joined."""
        shape = cfg.engine.nemo_rl.cluster
        return shape.num_nodes * shape.gpus_per_node

    def preflight(self, cfg: ExperimentConfig, run_dir: Path | None, download_models: bool) -> list[Check]:
        """Models offline, every job step's interpreter in the image, the simulator (``preflight.run_checks``)."""
        if download_models:
            preflight.download_models(cfg)
        return preflight.run_checks(cfg, run_dir)

    def megatron_python(self) -> str | None:
        """The Megatron worker venv of the release image, or ``NEMO_ACT_PYTHON_MCORE`` (``interpreters.python_for``)."""
        python = interpreters.python_for("mcore")
        return None if python == sys.executable else python

    def check_layout(self, cfg: ExperimentConfig) -> list[tuple[str, str]]:
        """The recipe's TP/PP/EP/DP layout and memory per GPU (``layout.plan``), printed; its refusals."""
        result = plan(cfg)
        print_plan(cfg, result)
        return list(result.refusals)


ENGINE = NeMoRLEngine()
