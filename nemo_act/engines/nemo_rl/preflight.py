"""What a cluster job checks before it starts Ray (``nemo-act cluster-check``): engine-free.

Compute nodes usually have no internet and jobs run with ``HF_HUB_OFFLINE=1``, and each step of a
run uses its own interpreter in the NeMo-RL container (:mod:`.interpreters`). A job that would stop
an hour in, at its first export or evaluation, stops here instead, before any node-hour is spent on
Ray and training, with one line per problem:

* every model the pipeline loads (``model.name_or_path``, ``pipeline.init``, ``pipeline.pairs_policy``)
  is a local HF folder or in the HF cache (``$HF_HOME``), weights included;
* every step's interpreter imports what the step needs (the pipeline, the NeMo-RL driver, the
  Megatron export, vLLM generation, the live benchmark env);
* experts played in the live env find its modules in the pipeline's own interpreter, and the
  programs it runs (ScienceWorld's ``java``) are on ``PATH``.
"""

from __future__ import annotations

import platform
import shutil
from pathlib import Path

from nemo_act import inputs
from nemo_act.benchmarks.base import plays_experts
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.manifest import manifest_path
from nemo_act.engines import Check
from nemo_act.engines.nemo_rl import interpreters
from nemo_act.generation.simple import NOT_MODELS
from nemo_act.stage_kinds import needs_pairs

AARCH64_HINT = (
    " On aarch64 (GH200) some simulators have no wheels (slurm/README.md lists them): "
    "run the env-bound steps on x86 nodes with slurm/env_steps.sub (experts before this job; evaluation "
    "after it, with NEMO_ACT_OVERRIDES=pipeline.eval.stages=none here), see slurm/README.md."
)


def model_refs(cfg: ExperimentConfig) -> list[str]:
    """Every model the pipeline loads (starting point, pair sampler), in order, without repeats."""
    refs = [cfg.pipeline.init or cfg.model.name_or_path, cfg.model.name_or_path, cfg.pipeline.pairs_policy]
    return list(dict.fromkeys(r for r in refs if r and r not in NOT_MODELS))


def check_model(ref: str) -> Check:
    """A local HF folder, or a hub name already in the HF cache (compute nodes are offline), with weights."""
    problem = inputs.model_problem(ref, offline=True)
    if problem:
        return Check(f"model {ref}", False, f"{problem} (slurm/build_image.sub downloads the recipe's models)")
    folder = Path(ref).expanduser()
    return Check(f"model {ref}", True, str(folder if folder.is_dir() else inputs.cached_snapshot(ref)))


def job_steps(cfg: ExperimentConfig) -> list[str]:
    """The kinds of child process a run of ``cfg.pipeline`` starts (see :func:`.interpreters.step`)."""
    steps = ["pipeline"]
    if needs_pairs(cfg.pipeline.stages):
        steps += ["pairs", "selection"]
    if cfg.engine.name == "nemo_rl":
        steps += ["driver", "export"]
    if cfg.pipeline.eval.stages != "none":
        steps.append("evaluate")
    return steps


def _hint() -> str:
    return AARCH64_HINT if platform.machine() == "aarch64" else ""


def check_step(name: str, cfg: ExperimentConfig) -> Check:
    """The step's interpreter exists and imports what the step needs."""
    spec = interpreters.step(name, cfg.generation.backend, cfg.benchmark.python_modules)
    python = interpreters.python_for(spec.venv)
    try:
        interpreters.check(name, python, spec)
    except interpreters.InterpreterError as err:
        extra = _hint() if name == "evaluate" and "lacks" in str(err) else ""
        return Check(f"step {name}", False, f"{err}{extra}")
    return Check(f"step {name}", True, f"{python} ({interpreters.KIND_LABEL[spec.venv]})")


def _experts_done(cfg: ExperimentConfig, run_dir: Path | None) -> list[Path] | None:
    """The run's expert files when all it needs are finished (manifest written), else None."""
    if run_dir is None:
        return None
    files = [run_dir / "data" / "experts.jsonl"]
    if needs_pairs(cfg.pipeline.stages):
        files.append(run_dir / "data" / "heldout_experts.jsonl")
    return files if all(manifest_path(f).exists() for f in files) else None


def check_benchmark(cfg: ExperimentConfig, run_dir: Path | None = None) -> list[Check]:
    """Experts played in the live env: its modules in the pipeline's interpreter; its programs on PATH.

    Experts already collected in ``run_dir`` (e.g. by slurm/env_steps.sub on x86 nodes) need neither.
    """
    out = []
    bench = cfg.benchmark
    live = plays_experts(bench)
    done = _experts_done(cfg, run_dir) if live else None
    if done:
        return [Check(f"{bench.name} experts", True, f"collected already: {', '.join(map(str, done))}")]
    if live and bench.python_modules:
        python = interpreters.python_for("base")
        spec = interpreters.Step("base", tuple(bench.python_modules), f"{bench.name} experts played in the env")
        try:
            interpreters.check("experts", python, spec)
            out.append(Check(f"{bench.name} experts", True, f"{', '.join(bench.python_modules)} in {python}"))
        except interpreters.InterpreterError as err:
            out.append(Check(f"{bench.name} experts", False, f"{err}{_hint()}"))
    for exe in bench.executables:
        found = shutil.which(exe)
        detail = found or f"{exe} is not on PATH ({bench.name} runs it): the prepared image adds a JRE"
        out.append(Check(f"{bench.name} needs {exe}", found is not None, detail))
    return out


def download_models(cfg: ExperimentConfig) -> None:
    """Download every hub model of the run into the HF cache (once, where there is internet)."""
    from huggingface_hub import snapshot_download

    for ref in model_refs(cfg):
        if not Path(ref).expanduser().exists() and not ref.startswith(("/", ".", "~")):
            print(f"downloading {ref} ...", flush=True)
            print(snapshot_download(ref), flush=True)


def run_checks(cfg: ExperimentConfig, run_dir: Path | None = None) -> list[Check]:
    """Every preflight check of a cluster run, in the order a job meets them."""
    checks = [check_model(ref) for ref in model_refs(cfg)]
    checks += check_benchmark(cfg, run_dir)
    checks += [check_step(name, cfg) for name in job_steps(cfg)]
    return checks
