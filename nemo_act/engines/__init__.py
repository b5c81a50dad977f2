"""The engine boundary: what the core asks of a training engine, and how it finds the one a config names.

Engines are plugins, like benchmarks: ``engine.name`` names a module (a subpackage of this package, as the two
shipped engines are, or any module path such as ``my_pkg.my_engine``) that holds ``ENGINE``, an :class:`Engine`,
and ``CONFIG``, the settings model of its ``engine`` block (a subclass of
:class:`~nemo_act.config.schema.EngineConfigBase`, checked when the config loads). This module names none of
them: the pipeline runner and the CLI call :func:`engine_for` and never import an engine's modules or branch on
its name (``tests/test_architecture.py`` checks both). Everything engine-specific a caller needs is a method here:
training a stage, how a data step runs (in this process, or in a child process with the engine's interpreter),
what of the engine changes a stage's result (its fingerprint), what a plan and a checklist show for a stage, the
GPUs a job holds for generation, the preflight checks and the layout check of a cluster recipe.
"""

from __future__ import annotations

import pkgutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nemo_act import inputs
from nemo_act.common import plugins
from nemo_act.config.schema import ExperimentConfig

if TYPE_CHECKING:
    from collections.abc import Sequence


class StageStopped(RuntimeError):
    """A training stage that stopped before its last step by its job's save deadline: not finished, resumable.

    The engine saved a checkpoint and returned early (NeMo-RL's loops do at ``checkpoint_must_save_by``); the stage
    is neither exported nor marked complete, and the same command resumes it from that checkpoint. ``nemo-act run``
    ends with :attr:`exit_code` (75, sysexits' EX_TEMPFAIL: try again later), which the Slurm job answers with a
    requeue (``slurm/_act_job.sh``).
    """

    exit_code = 75


@dataclass(frozen=True)
class Check:
    """One preflight check: what, whether it passed, and the detail (where, or why not)."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class PlannedStep:
    """One row of a run's plan for a stage: the step, its interpreter, what it reads and writes."""

    step: str
    python: str
    inputs: str
    outputs: Path


class Engine:
    """A training engine. Subclasses set :attr:`name`, :attr:`isolates_steps`, :attr:`trainer`; override what differs.

    Attributes:
        name: ``engine.name`` in the config.
        isolates_steps: Whether GPU data steps (pairs, selection, baseline data, evaluation) run each in a child
            process (:meth:`step_command`), so no step keeps GPU memory the next stage's job needs.
        trainer: ``module:function`` that :meth:`train_stage` calls ("": the subclass overrides it).
    """

    name: str
    isolates_steps: bool = False
    trainer: str = ""

    def train_stage(self, kind: str, init: str, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: Path) -> Path:
        """Train one stage; the result is an HF checkpoint folder (``out``).

        The shipped engines name a ``module:function`` of this signature in :attr:`trainer`, imported on first use
        (training's heavy imports stay out of planning and checking); an engine of yours may override this instead.

        Args:
            kind: Stage kind (its entry in :data:`~nemo_act.stage_kinds.STAGE_KINDS`).
            init: HF checkpoint to start from.
            rows: Stage rows (:mod:`nemo_act.stage_data`).
            cfg: Experiment config.
            out: Stage folder.
        """
        if not self.trainer:
            raise NotImplementedError(f"engine {self.name!r} names no trainer and does not override train_stage")
        return plugins.load(self.trainer)(kind, init, rows, cfg, out)

    def fingerprint(self, cfg: ExperimentConfig) -> dict[str, Any]:
        """What of the engine changes a stage's result (not its layout: a job may be resized)."""
        return {}

    def step_python(self, step: str, cfg: ExperimentConfig) -> str:
        """The interpreter a data step runs with, for plans (``(here)``: this process)."""
        return "(here)"

    def step_command(self, step: str, argv: Sequence[str], cfg: ExperimentConfig) -> list[str]:
        """``[python, *argv]`` of a data step run as a child process, its interpreter checked first."""
        return [sys.executable, *argv]

    def step_env(self) -> dict[str, str] | None:
        """The environment of a data step's child process (None: this one's)."""
        return None

    def stage_plan(self, kind: str, init: str, rows_from: str, out: Path, cfg: ExperimentConfig) -> list[PlannedStep]:
        """The plan's rows of training one stage."""
        return [PlannedStep(f"train {kind}", "(here)", f"{init}, {rows_from}", out)]

    def stage_log(self, stage: Path) -> str:
        """Where a stage's training log is (for the checklist)."""
        return str(stage)

    def stage_started(self, stage: Path) -> bool:
        """Whether a stage left a checkpoint it can resume from (the checklist's ``ok`` of an unfinished stage)."""
        return False

    def job_gpus(self, cfg: ExperimentConfig) -> int | None:
        """GPUs the job's cluster holds for generation engines (``generation.engines=auto``); None: count here."""
        return None

    def preflight(self, cfg: ExperimentConfig, run_dir: Path | None, download_models: bool) -> list[Check]:
        """Checks before a run: models, interpreters, the simulator (``nemo-act cluster-check``)."""
        try:
            inputs.run_inputs(cfg, None)
        except inputs.MissingInputs as err:
            return [Check("inputs", False, str(err))]
        return [Check("inputs", True, "every model and file the run reads is there")]

    def megatron_python(self) -> str | None:
        """An interpreter with Megatron-Core + Megatron-Bridge this engine's installation provides (None: none).

        What ``nemo-act convert`` runs the checkpoint converters with where no other is given.
        """
        return None

    def check_layout(self, cfg: ExperimentConfig) -> list[tuple[str, str]]:
        """Print a cluster recipe's layout and memory estimate; the refusals as (rule, reason) (``nemo-act plan``)."""
        print(f"the {self.name} engine runs on one machine: no parallel layout to check")
        return []


def engine_named(name: str) -> Engine:
    """The ``ENGINE`` of the module that ``engine.name: <name>`` names (imported on first use).

    Raises:
        ValueError: The module cannot be imported or has no :class:`Engine` as ``ENGINE``.
    """
    module = plugins.import_module(plugins.engine_module(name), "engine.name")
    engine = getattr(module, "ENGINE", None)
    if not isinstance(engine, Engine):
        raise ValueError(f"engine.name: module {module.__name__} has no ENGINE, an instance of {__name__}.Engine")
    return engine


def engine_for(cfg: ExperimentConfig) -> Engine:
    """The engine ``cfg.engine.name`` names."""
    return engine_named(cfg.engine.name)


def shipped_engines() -> list[str]:
    """The names of the engines this package ships: its subpackages (found on disk, named nowhere)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg)


def train_stage(kind: str, init: str, rows: list[dict[str, Any]], cfg: ExperimentConfig, out: str | Path) -> Path:
    """Train one stage on ``cfg.engine.name``'s engine (:meth:`Engine.train_stage`): an HF checkpoint in ``out``."""
    return engine_for(cfg).train_stage(kind, init, rows, cfg, Path(out))
