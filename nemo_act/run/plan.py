"""A run's plan and checklist: every step the runner takes, with its interpreter, inputs and outputs.

``NEMO_ACT_DRY_RUN=1 nemo-act run`` prints :func:`plan` and runs nothing; ``nemo-act checklist`` (printed by
``slurm/act_preflight.sub``) marks each step ``ok`` or ``missing`` with where its log is. Both read the runner's
config and folders, and the engine's :meth:`~nemo_act.engines.Engine.stage_plan` for what training a stage is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nemo_act.data.manifest import manifest_path
from nemo_act.evaluation.rollout import planned_lanes
from nemo_act.generation import engines_summary, planned_engines
from nemo_act.run.pipeline import stage_complete
from nemo_act.stage_data import expand
from nemo_act.stage_kinds import DATA_KINDS, built_data, data_steps, needs_pairs, stage_kind

if TYPE_CHECKING:
    from nemo_act.config.schema import ExperimentConfig
    from nemo_act.run.pipeline import PipelineRunner

GENERATION_STEPS = ("pairs", "selection", "evaluate")  # data steps that call the policy (with DATA_KINDS')
ENV_STEPS = ("experts", "evaluate")  # data steps that run envs (with DATA_KINDS')


def plan(runner: PipelineRunner) -> list[dict[str, str]]:
    """Every step :meth:`run` takes, in order, with its interpreter, inputs and outputs; nothing runs.

    The interpreter is the one the engine gives the step (:meth:`~nemo_act.engines.Engine.step_python`: the
    NeMo-RL image's venv on the cluster engine); on the local engine everything runs here.
    """
    cfg, d, data = runner.cfg, runner.dir, runner.data_dir

    def py(step: str) -> str:
        return runner.engine.step_python(step, cfg) if runner.isolate else "(here)"

    rows: list[dict[str, str]] = []

    n = planned_engines(cfg, runner.engine.job_gpus(cfg))  # once: with generation.engines=auto it may count GPUs
    engines = engines_summary(cfg, n)
    lanes = planned_lanes(cfg, n)

    def add(step: str, python: str, inputs: str, outputs: str | Path) -> None:
        row = {"step": step, "python": python, "inputs": inputs, "outputs": str(outputs)}
        on = workers(cfg, step, engines, lanes)
        rows.append(row | ({"workers": on} if on else {}))

    def source(which: str) -> str:
        src = getattr(cfg.pipeline, which)
        return f"successful trajectories of {src.path}" if src.path else f"{cfg.benchmark.name} {src.split}"

    if cfg.pipeline.stages:
        add("experts", py("experts"), source("experts"), data / "experts.jsonl")
    policy = cfg.pipeline.pairs_policy or runner.init
    if cfg.pairs.from_data_k and policy != "from_data":
        policy = f"{policy} + {cfg.pairs.from_data_k} from_data"
    has_pairs = needs_pairs(cfg.pipeline.stages)
    if has_pairs:
        if "pairs" in data_steps(cfg.pipeline.stages):
            add("pairs", py("pairs"), f"experts.jsonl, policy {policy}", data / "pairs.jsonl")
        add("experts", py("experts"), source("heldout"), data / "heldout_experts.jsonl")
        add("pairs", py("pairs"), f"heldout_experts.jsonl, policy {policy}", data / "heldout_pairs.jsonl")
        add("selection", py("selection"), f"{runner.init}, heldout_pairs.jsonl", d / "selection" / "init.json")
    files = {"experts": "experts.jsonl", "pairs": "pairs.jsonl"}
    for kind in data_steps(cfg.pipeline.stages):
        spec = built_data(kind)
        if spec and spec.policy == "init":
            files[kind] = str(runner.baseline_folder(kind) / str(spec.audit))
            add(kind, py("baseline_data"), f"experts.jsonl, policy {runner.init}", files[kind])
    ckpt, checkpoints = runner.init, []
    for i, kind in enumerate(expand(cfg.pipeline.stages, cfg), start=1):
        out = d / "stages" / f"{i:02d}_{kind}"
        spec = built_data(stage_kind(kind).data)
        if spec and spec.policy == "stage":
            files[spec.name] = str(runner.baseline_folder(spec.name, out.name) / str(spec.audit))
            add(spec.name, py("baseline_data"), f"experts.jsonl, policy {ckpt}", files[spec.name])
        rows_from = files[stage_kind(kind).data]
        for planned in runner.engine.stage_plan(kind, ckpt, rows_from, out, cfg):
            add(planned.step, planned.python, planned.inputs, planned.outputs)
        ckpt = str(out)
        checkpoints.append(ckpt)
        if stage_kind(kind).selection_eval:
            sel = d / "selection" / f"{out.name}.json"
            add("selection", py("selection"), f"{out.name}, heldout_pairs.jsonl", sel)
    ev = cfg.pipeline.eval
    for name, c in runner.env_eval_targets(checkpoints):
        what = name if c != runner.init else f"init ({c})"
        add("evaluate", py("evaluate"), f"{what}, {cfg.benchmark.name} {ev.split}", d / "eval" / name)
    return rows


def workers(cfg: ExperimentConfig, step: str, engines: str, lanes: int) -> str:
    """What a data step runs on; empty for a step that neither generates nor runs envs.

    Args:
        cfg: The run's config.
        step: The step's name in :func:`plan`.
        engines: Its generation engines (:func:`~nemo_act.generation.engines_summary`, computed once).
        lanes: The episode lanes of a step that both generates and runs envs (``env.lanes`` resolved).
    """
    ev = cfg.pipeline.eval
    baseline = step in DATA_KINDS and DATA_KINDS[step].builder is not None  # the reflection baselines' data
    parts = []
    if step in GENERATION_STEPS or baseline:
        parts.append(engines)
    if step in ENV_STEPS or baseline:
        played = step in GENERATION_STEPS or baseline  # the policy plays these episodes (experts replay files)
        lane_note = f", {lanes} lane{'s' * (lanes > 1)}" if played else ""
        parts.append(f"{ev.workers} env workers x {ev.envs_per_worker} envs{lane_note}")
    return "; ".join(parts)


def print_plan(runner: PipelineRunner) -> list[dict[str, str]]:
    """:meth:`plan`, one line per step (whole paths, so a job log can be searched)."""
    rows = plan(runner)
    print(f"plan of {runner.cfg.pipeline.name} ({runner.cfg.engine.name} engine) in {runner.dir}:")
    width = max(len(r["step"]) for r in rows)
    for n, r in enumerate(rows, start=1):
        print(f"{n:>3}. {r['step']:<{width}}  python: {r['python']}")
        print(f"     {'':<{width}}  in: {r['inputs']}  ->  out: {r['outputs']}")
        if r.get("workers"):
            print(f"     {'':<{width}}  on: {r['workers']}")
    return rows


def checklist(runner: PipelineRunner, log_dir: str | Path | None = None) -> list[dict[str, str]]:
    """Each step of :meth:`plan` with ``ok`` / ``missing`` and where its log is (the preflight's report).

    A step is ``ok`` when its output is finished: a manifest beside a data file, a ``stage.json``
    marked complete (train), an HF ``config.json`` in the stage folder (export), a result file
    (selection, evaluation). With ``log_dir`` (a Slurm job's), the job's own steps come first:
    the preflight checks and Ray.
    """
    rows: list[dict[str, str]] = []
    job_log = str(Path(log_dir) / "pipeline.log") if log_dir else "(console)"
    if log_dir is not None:
        check_log = Path(log_dir) / "cluster-check.log"
        text = check_log.read_text() if check_log.exists() else ""
        passed = " checks passed" in text and "error:" not in text
        rows.append({"step": "preflight checks", "ok": passed, "log": str(check_log)})
        ray_up = (Path(log_dir) / "STARTED_RAY_HEAD").exists()
        rows.append({"step": "Ray head up", "ok": ray_up, "log": str(Path(log_dir) / "ray-head.log")})
    for r in plan(runner):
        out = Path(r["outputs"])
        step = r["step"]
        if step in ("experts", "pairs"):
            ok, log = manifest_path(out).exists(), job_log
        elif step.startswith("train "):
            stage = out.parent if out.name == "checkpoints" else out
            ok, log = stage_complete(stage) or runner.engine.stage_started(stage), runner.engine.stage_log(stage)
        elif step.startswith("export "):
            ok, log = (out / "config.json").exists() and stage_complete(out), job_log
        elif step == "evaluate":
            ok, log = (out / "summary.json").exists(), job_log
        else:
            ok, log = out.exists(), job_log
        stage = out.parent.name if out.name == "checkpoints" else out.name
        rows.append({"step": f"{step}: {stage}", "ok": ok, "log": log})
    return [dict(r, ok="ok" if r["ok"] else "missing") for r in rows]
