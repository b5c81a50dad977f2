"""Pipeline runner (``nemo-act run``): data prerequisites, a list of stages, evaluation; skip and resume.

Run folder layout (``run_dir``)::

    config.yaml                 resolved config of the run
    data/experts.jsonl          expert trajectories (pipeline.experts) + manifest (data_dir: shareable)
    data/pairs.jsonl            ACT pairs sampled from the initial policy + manifest
    data/heldout_experts.jsonl  held-out expert states (pipeline.heldout) and their pairs
    stages/01_act/              HF checkpoint + config.yaml + metrics.jsonl + stage.json
    stages/02_il/ ...
    eval/<stage>/               env evaluation (seed_<s>/episodes.jsonl, summary.json; started.json: what it plays with)
    selection/<stage>.json      held-out selection accuracy (free and forced choice)
    run.json                    what ran, what was skipped, final summaries; ``history``: every invocation
    invocations.jsonl           one line per event of every invocation (started, each stage, finished or
                                failed), appended and fsynced as it happens: a killed run leaves its trace

A stage is skipped when its ``stage.json`` says complete and its fingerprint (stage kind,
starting checkpoint's fingerprint, data hash, the stage's hyperparameters, prompt and reward
config, seed; on the cluster engine also precision, NeMo-RL bases and overrides) is unchanged. A
stage that crashed restarts from its last checkpoint in ``stages/NN_kind/checkpoints`` (TRL's on the
local engine, NeMo-RL's on the cluster engine); a stage whose fingerprint changed is retrained from
scratch, and so is every stage after it. An evaluation or a held-out selection is reused when its fingerprint and
the sha256 of the weights it used are those of now; else it is made again, saying why (one rule for the three:
:func:`nemo_act.run.cache.decide`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from nemo_act import stage_data
from nemo_act.benchmarks.base import adapter_of
from nemo_act.common.plugins import load
from nemo_act.common.quiet import quiet_libraries
from nemo_act.config.load import load_config, to_yaml
from nemo_act.config.schema import ExperimentConfig, ExpertSource
from nemo_act.data.io import append_json_line, read_all, read_json, read_jsonl, write_text_atomic
from nemo_act.data.manifest import read_manifest
from nemo_act.data.records import Pair, Trajectory
from nemo_act.engines import engine_for
from nemo_act.evaluation.rollout import evaluate_policy, summary_line
from nemo_act.evaluation.selection import forced_choice, free_selection, selection_sampling
from nemo_act.generation import held, make_pairs_generator, open_generators
from nemo_act.generation.ray_pool import close_pools
from nemo_act.generation.vllm import job_batch_invariant_warning
from nemo_act.inputs import run_inputs
from nemo_act.run.cache import (
    EVAL_STARTED,
    decide,
    eval_fingerprint,
    read_weights_differ,
    selection_fingerprint,
    stage_complete,
    stage_fingerprint,
    weights_digest,
    weights_record,
    written_weights_differ,
)
from nemo_act.stage_data import expand, stage_experiment
from nemo_act.stage_kinds import DATA_KINDS, built_data, data_steps, needs_pairs, stage_kind
from nemo_act.steps.branching import require_episodes
from nemo_act.steps.experts import collect_experts, data_warnings, import_rollouts
from nemo_act.steps.pairs import collect_pairs


class PipelineRunner:
    """Runs ``cfg.pipeline`` in ``run_dir`` with ``cfg.engine`` (local, or nemo_rl on a Ray cluster).

    Args:
        cfg: Experiment config (``pipeline`` section).
        run_dir: Run folder (default ``cfg.run_dir``).
        console: Where progress lines go.
    """

    def __init__(
        self,
        cfg: ExperimentConfig,
        run_dir: str | Path | None = None,
        data_dir: str | Path | None = None,
        console: Console | None = None,
    ):
        self.cfg = cfg
        self.dir = Path(run_dir or cfg.run_dir)
        self.data_dir = Path(data_dir) if data_dir else self.dir / "data"
        self.console = console or Console()
        self.init = cfg.pipeline.init or cfg.model.name_or_path
        self.log: dict[str, Any] = {"pipeline": cfg.pipeline.name, "stages": [], "started": time.time()}
        self._invocation = f"{self.log['started']:.3f}-{os.getpid()}"
        self.engine = engine_for(cfg)
        self._warned: set[str] = set()  # data warnings printed by this invocation
        adapter_of(cfg.benchmark)  # a broken adapter is named before any step (the protocol check)
        # an engine may run GPU generation (pairs, selection, eval; vLLM) in its own process, as training does, so
        # no step keeps GPU memory that the next stage's job needs (Engine.isolates_steps)
        self.isolate = self.engine.isolates_steps

    def _step(self, method: str, *args: str) -> None:
        """Run ``method(*args)`` of this runner in a child process (see :func:`main`).

        The interpreter is the one the engine names for the step (:meth:`~nemo_act.engines.Engine.step_command`:
        vLLM's venv in the NeMo-RL container when ``generation.backend=vllm``), checked first.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.dir / "config.yaml", to_yaml(self.cfg))
        argv = [
            "-m",
            "nemo_act.run.pipeline",
            "--run-dir",
            str(self.dir),
            "--data-dir",
            str(self.data_dir),
            method,
            *args,
        ]
        subprocess.run(self.engine.step_command(method, argv, self.cfg), check=True, env=self.engine.step_env())

    # ---- data -------------------------------------------------------------------------------------
    def experts(self, which: str) -> Path:
        """Collect (or reuse) the expert trajectories of ``pipeline.experts`` / ``pipeline.heldout``.

        With the source's ``path`` the successful trajectories of that file are taken instead (validated;
        :func:`~nemo_act.steps.experts.import_rollouts`).
        """
        out = self.data_dir / ("experts.jsonl" if which == "experts" else "heldout_experts.jsonl")
        return self.expert_file(getattr(self.cfg.pipeline, which), out)

    def expert_file(self, src: ExpertSource, out: Path) -> Path:
        """Collect (or reuse) the expert trajectories of one source into ``out`` (``path``: imported instead)."""
        if src.path is not None:
            import_rollouts(self.cfg, src.path, out)
            return out
        collect_experts(
            self.cfg,
            src.split,
            out,
            tasks=src.tasks,
            max_variations=src.max_variations,
            workers=self.cfg.pipeline.eval.workers,
        )
        for line in data_warnings(self.cfg, out):  # once per run: train and held-out read the same source
            if line not in self._warned:
                self._warned.add(line)
                self.console.print(f"[yellow]warning:[/] {line}", soft_wrap=True)
        return out

    def pairs(self, experts: Path, name: str) -> Path:
        """Sample (or reuse) ACT pairs for ``experts`` from the initial policy."""
        policy = self.cfg.pipeline.pairs_policy or self.init
        out = self.data_dir / name
        if self.isolate:
            self._step("pairs", str(experts), name)
            return out
        with held(make_pairs_generator(policy, self.cfg, experts)) as generator:
            collect_pairs(experts, generator, self.cfg, out)
        return out

    def print_pairs_summary(self, files: dict[str, Path]) -> None:
        """Print one table row per pairs file, from its manifest.

        States, pairs, samples dropped by reason, alternatives admissible: what a user checks before training.
        """
        table = Table(
            title="ACT pairs",
            title_justify="left",
            caption="states too long: expert action over prompt.max_candidate_chars, skipped; samples dropped: "
            "unparsable, a template copied (never an action), = expert, repeat, too long",
            caption_justify="left",
        )
        keys = ["states", "pairs", "states_without_pair", "states_too_long", "dropped_unparsable", "dropped_template"]
        keys += ["dropped_duplicate", "dropped_repeat", "dropped_too_long"]
        heads = ["states", "pairs", "states without a pair", "states too long", "unparsable", "template", "= expert"]
        heads += ["repeat", "samples too long"]
        table.add_column("split")
        for head in [*heads, "alternative admissible"]:
            table.add_column(head, justify="right")
        for split, path in files.items():
            c = read_manifest(path)["counts"]
            adm = c["alternative_admissible"]
            table.add_row(
                split, *(str(c.get(k, 0)) for k in keys), f"{adm} ({adm / c['pairs']:.0%})" if c["pairs"] else "0"
            )
        width = self.console.width  # a log file is no terminal: rich would fold the table into 80 cut columns
        if not self.console.is_terminal:
            self.console.width = max(width, 170)
        self.console.print(table)
        self.console.width = width

    def baseline_folder(self, kind: str, stage: str | None = None) -> Path:
        """Where a reflection baseline's data is built.

        ``data/<kind>``, or ``data/<kind>/<NN_kind>`` when its policy is the checkpoint a stage starts from
        (:attr:`~nemo_act.stage_kinds.DataKind.policy`).
        """
        spec = DATA_KINDS[kind]
        return self.data_dir / kind / (stage or "") if spec.policy == "stage" else self.data_dir / kind

    def baseline_data(self, kind: str, experts: Path, policy: str | None = None, stage: str | None = None) -> Path:
        """Build (or reuse) a reflection baseline's audit file (:data:`~nemo_act.stage_kinds.DATA_KINDS`).

        Args:
            kind: The data kind.
            experts: Expert trajectories.
            policy: The policy that samples (default: the initial one); critiques and reflections that the
                method asks of the frozen initial policy always come from ``pipeline.init``.
            stage: The consuming stage's folder name, for a kind built per stage.
        """
        spec = DATA_KINDS[kind]
        policy = policy or self.init
        folder = self.baseline_folder(kind, stage)
        if self.isolate:
            self._step("baseline_data", kind, str(experts), policy, stage or "")
            return folder / str(spec.audit)
        build = load(str(spec.builder))
        workers = self.cfg.pipeline.eval.workers
        if spec.policy == "stage":  # two models at once from round 2 on: the step's engines are split between them
            with open_generators(self.cfg, policy, self.init) as (generator, frozen):
                summary = build(self.cfg, experts, generator, folder, workers, critic=frozen)
        else:
            with open_generators(self.cfg, policy) as (generator,):
                summary = build(self.cfg, experts, generator, folder, workers)
        c = summary.counts
        self.console.print(f"{kind}: {c['kept']} examples kept; none for {c['dropped'] or 'no state'}")
        return summary.out

    # ---- stages -----------------------------------------------------------------------------------
    def run_stage(
        self,
        index: int,
        kind: str,
        init: str,
        inputs: dict[str, Path | None],
        rows: list[dict[str, Any]] | None = None,
        data: Path | None = None,
    ) -> str:
        """Train one stage unless an identical finished one exists; return its checkpoint folder.

        Args:
            index: Position in the pipeline (folder ``NN_kind``).
            kind: Stage kind.
            init: Starting checkpoint.
            inputs: The data files by kind (``experts``, ``pairs``, ``early_experience``): each stage
                reads the one its table entry names.
            rows: Ready-made rows instead of the kind's own (the demo's warm-up); then ``data`` is
                the file they were made from, for the fingerprint.
            data: See ``rows``.
        """
        out = self.dir / "stages" / f"{index:02d}_{kind}"
        data = data or inputs.get(stage_kind(kind).data)
        if data is None:
            raise ValueError(f"stage {kind} needs {stage_kind(kind).data}")
        fp = stage_fingerprint(kind, init, data, self.cfg)
        if self._reuse_stage(out, fp):
            return str(out)
        resumed = (out / "checkpoints").exists()
        self.console.rule(f"stage {out.name} ({'resuming' if resumed else 'from'} {init})")
        out.mkdir(parents=True, exist_ok=True)
        info = {"kind": kind, "init": init, "data": str(data), "fingerprint": fp, "complete": False, "resumed": resumed}
        write_text_atomic(out / "stage.json", json.dumps(info, indent=2) + "\n")
        self._event("stage", stage=out.name, status="resuming" if resumed else "training")
        rows = self._stage_rows(kind, init, data, rows, out.name)
        self._train(kind, init, rows, out, info)
        status = "resumed" if resumed else "trained"
        self.log["stages"].append({"stage": out.name, "status": status, "path": str(out), "seconds": info["seconds"]})
        self._event("stage", stage=out.name, status=status, seconds=info["seconds"])
        return str(out)

    def _reuse_stage(self, out: Path, fp: str) -> bool:
        """Whether a finished stage in ``out`` stands (:func:`~nemo_act.run.cache.decide`); clears one to redo."""
        marker = out / "stage.json"
        info = read_json(marker) if marker.exists() else None
        decision, why = decide(info, fp, bool(info and info["complete"]), info and written_weights_differ(out, info))
        if decision == "redo":
            self.console.print(f"[yellow]restart[/] {out.name}: {why}")
            shutil.rmtree(out)
        elif decision == "reuse":
            self.console.print(f"[green]skip[/] {out.name}: {why}")
            shutil.rmtree(out / "checkpoints", ignore_errors=True)  # left by a kill right after the marker
            self.log["stages"].append({"stage": out.name, "status": "skipped", "path": str(out)})
            self._event("stage", stage=out.name, status="skipped")
        return decision == "reuse"

    def _stage_rows(
        self, kind: str, init: str, data: Path, rows: list[dict[str, Any]] | None, name: str
    ) -> list[dict[str, Any]]:
        """A stage's training rows: the kind's own from ``data``, or ready-made ones capped as those are."""
        if rows is None:
            dry = os.environ.get("NEMO_ACT_DRY_RUN") == "1"  # a dry run loads nothing, not even a tokenizer
            rows = stage_data.rows_for(kind, data, stage_experiment(kind, self.cfg), None if dry else init)
        else:  # ready-made: not fitted (as before), capped as the kind's own rows are
            rows = stage_data.capped(kind, rows, self.cfg)
        if not rows:
            raise ValueError(
                f"stage {name}: {data} gives no training rows (a baseline whose every example was dropped: "
                "its manifest counts say why)"
            )
        return rows

    def _train(self, kind: str, init: str, rows: list[dict[str, Any]], out: Path, info: dict[str, Any]) -> None:
        """Launch the engine's training of a stage, then mark it complete with the weights it wrote."""
        # every data step closes its pools; one left open (an error path, a caller's own) must not hold the GPUs
        if closed := close_pools():
            self.console.print(f"closed {closed} engine pool(s) still open before training {out.name}")
        if warning := job_batch_invariant_warning(os.environ):
            self.console.print(f"{out.name}: {warning}")
        t = time.time()
        self.engine.train_stage(kind, init, rows, self.cfg, out)
        info.update(complete=True, seconds=round(time.time() - t, 1), rows=len(rows),
                    weights=weights_record(out))  # fmt: skip
        write_text_atomic(out / "stage.json", json.dumps(info, indent=2) + "\n")
        # only now: a kill before the marker said complete resumes from these, never retrains the stage
        shutil.rmtree(out / "checkpoints", ignore_errors=True)

    # ---- the invocation log -----------------------------------------------------------------------
    def _event(self, event: str, **fields: Any) -> None:
        """Append one event of this invocation to ``invocations.jsonl`` (flushed and fsynced)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        record = {"invocation": self._invocation, "event": event, "time": time.time(), **fields}
        append_json_line(self.dir / "invocations.jsonl", record)

    def _last_event(self, event: str, **fields: Any) -> None:
        """Record how an invocation ended, unless the run folder cannot take it (read-only, full).

        Then the error that ended the run is the one reported, not a second one from writing this line.
        """
        try:
            self._event(event, **fields)
        except OSError:
            pass

    def history(self) -> list[dict[str, Any]]:
        """Every invocation of this run folder, oldest first.

        Each: when it started and ended, how (``finished``, ``failed: <error>``, or ``interrupted``: killed
        before it could say), and each stage's last status (``training``/``resuming`` when cut short there).
        """
        path = self.dir / "invocations.jsonl"
        runs: dict[str, dict[str, Any]] = {}
        for raw in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
            try:
                e = json.loads(raw)
            except ValueError:  # a line cut short by a kill
                continue
            run = runs.setdefault(
                e["invocation"], {"started": e["time"], "ended": None, "outcome": "interrupted", "stages": {}}
            )
            if e["event"] == "started":
                run.update(only=e.get("only"), host=e.get("host"), pid=e.get("pid"))
            elif e["event"] == "stage":
                run["stages"][e["stage"]] = e["status"]
            elif e["event"] in ("finished", "failed", "interrupted"):
                run["ended"] = e["time"]
                run["outcome"] = f"failed: {e.get('error', '')}" if e["event"] == "failed" else e["event"]
        return list(runs.values())

    # ---- evaluation -------------------------------------------------------------------------------
    def selection(self, name: str, checkpoint: str, heldout_pairs: Path) -> dict[str, Any]:
        """Held-out selection accuracy (free generation and forced choice) of a checkpoint."""
        out = self.dir / "selection" / f"{name}.json"
        fp, weights = selection_fingerprint(checkpoint, heldout_pairs, self.cfg), weights_digest(checkpoint)
        done = read_json(out) if out.exists() else None
        decision, why = decide(done, fp, True, done and read_weights_differ(done, weights))
        if decision == "reuse":
            return done
        if decision == "redo":
            self.console.print(f"[yellow]redo[/] held-out selection of {name}: {why}")
        if self.isolate:
            self._step("selection", name, checkpoint, str(heldout_pairs))
            return read_json(out)
        pairs = list(read_jsonl(heldout_pairs, Pair))
        with open_generators(self.cfg, checkpoint) as (gen,):
            free, rows = free_selection(gen, pairs, self.cfg, selection_sampling(self.cfg), self.cfg.seed)
            result = {"checkpoint": checkpoint, "free": free, "forced": forced_choice(gen, pairs, self.cfg)}
        result.update(fingerprint=fp, weights=weights)
        acc = free["accuracy"]
        self.console.print(
            f"held-out selection, {name}: {100 * acc['value']:.1f}% ± {100 * acc['stderr']:.1f} free, "
            f"{100 * result['forced']['accuracy']['value']:.1f}% forced choice (n={acc['n']}; "
            f"chance {100 * free['chance']:.0f}%)"
        )
        write_text_atomic(out, json.dumps(result, indent=2) + "\n")
        write_text_atomic(out.with_suffix(".responses.jsonl"), "".join(json.dumps(r) + "\n" for r in rows))
        return result

    def evaluate(self, name: str, checkpoint: str) -> dict[str, Any]:
        """Env evaluation of a checkpoint (``pipeline.eval``)."""
        ev = self.cfg.pipeline.eval
        out = self.dir / "eval" / name
        fp, weights = eval_fingerprint(checkpoint, self.cfg), weights_digest(checkpoint)
        finished, started = out / "summary.json", out / EVAL_STARTED
        path = finished if finished.exists() else started
        done = read_json(path) if path.exists() else None
        decision, why = decide(done, fp, path == finished, done and read_weights_differ(done, weights))
        if decision == "reuse":
            self.console.print(f"[green]skip[/] evaluation of {name}: {why}")
            return done
        if decision == "redo":  # its episodes (finished, or played so far) came from other weights or settings
            self.console.print(f"[yellow]redo[/] evaluation of {name}: {why}")
            shutil.rmtree(out)
        write_text_atomic(started, json.dumps({"fingerprint": fp, "weights": weights}, indent=2) + "\n")
        if self.isolate:
            self._step("evaluate", name, checkpoint)
            return read_json(out / "summary.json")
        with open_generators(self.cfg, checkpoint) as (policy,):
            result = evaluate_policy(
                policy,
                self.cfg,
                ev.split,
                out,
                tasks=ev.tasks,
                max_variations=ev.max_variations,
                workers=ev.workers,
                envs_per_worker=ev.envs_per_worker,
            )
        result.update(fingerprint=fp, weights=weights)
        write_text_atomic(out / "summary.json", json.dumps(result, indent=2) + "\n")
        self.console.print(f"evaluation of {name}: {summary_line(result)}")
        return result

    # ---- the whole run ----------------------------------------------------------------------------
    def trained_checkpoints(self) -> list[str]:
        """The stage folders of this run that finished, in pipeline order (stops at the first unfinished)."""
        out = []
        for i, kind in enumerate(expand(self.cfg.pipeline.stages, self.cfg), start=1):
            folder = self.dir / "stages" / f"{i:02d}_{kind}"
            if not stage_complete(folder):
                break
            out.append(str(folder))
        return out

    def run(self, only: str | None = None) -> dict[str, Any]:
        """Collect data, train every stage, evaluate; write ``run.json``. Returns the run log.

        Args:
            only: ``experts``: collect the expert trajectories (train and held-out) and stop;
                ``evaluate``: evaluate the finished stages (``pipeline.eval.stages``) and stop. These
                let the env-bound steps run on other nodes than training (slurm/env_steps.sub).
        """
        if only not in (None, "experts", "evaluate"):
            raise ValueError(f"--only {only}: choose experts or evaluate")
        run_inputs(self.cfg, only)  # every model and file it will load, before its first step
        self._event("started", only=only, host=socket.gethostname(), pid=os.getpid())
        try:
            log = self._run(only)
        except KeyboardInterrupt:  # Ctrl-C: the run stopped where it was, to be resumed
            self._last_event("interrupted")
            raise
        except BaseException as err:  # a kill -9 leaves the invocation open (history: interrupted)
            self._last_event("failed", error=f"{type(err).__name__}: {str(err)[:500]}")
            raise
        self._event("finished")
        return log

    def _run(self, only: str | None) -> dict[str, Any]:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.dir / "config.yaml", to_yaml(self.cfg))
        stages = expand(self.cfg.pipeline.stages, self.cfg)
        has_pairs = needs_pairs(stages)
        if only == "experts":
            self.log["experts"] = [str(self.experts("experts"))]
            if has_pairs:
                self.log["experts"].append(str(self.experts("heldout")))
            return self.log
        if only == "evaluate":
            checkpoints = self.trained_checkpoints()
            if not checkpoints and stages:
                raise ValueError(f"{self.dir}: no finished stage to evaluate")
            return self._evaluate(checkpoints)
        if not stages:  # a prompting baseline: nothing to build or train; the initial policy is evaluated
            return self._evaluate([])
        experts = self.experts("experts")
        if any((spec := built_data(k)) is not None and spec.env for k in data_steps(stages)):
            # a reflection baseline branches in the env: fail before any pair is sampled, not after

            require_episodes(read_all(experts, Trajectory, "expert trajectories"), experts, self.cfg.pipeline.name)
        inputs: dict[str, Path | None] = {"experts": experts}
        heldout_pairs = None
        if has_pairs:
            if "pairs" in data_steps(stages):  # act_onpolicy alone samples its own, per round
                inputs["pairs"] = self.pairs(experts, "pairs.jsonl")
            heldout_pairs = self.pairs(self.experts("heldout"), "heldout_pairs.jsonl")
            train = {"train": inputs["pairs"]} if "pairs" in inputs else {}
            self.print_pairs_summary({**train, "held-out": heldout_pairs})
            self.log["selection"] = {"init": self.selection("init", self.init, heldout_pairs)}
        for kind in data_steps(stages):
            if built_data(kind) and DATA_KINDS[kind].policy == "init":
                inputs[kind] = self.baseline_data(kind, experts)
        ckpt = self.init
        checkpoints = []
        for i, kind in enumerate(stages, start=1):
            data = stage_kind(kind).data
            if built_data(data) and DATA_KINDS[data].policy == "stage":  # SAND: sampled by the current policy
                inputs[data] = self.baseline_data(data, experts, ckpt, f"{i:02d}_{kind}")
            ckpt = self.run_stage(i, kind, ckpt, inputs)
            checkpoints.append(ckpt)
            if stage_kind(kind).selection_eval and heldout_pairs is not None:
                self.log["selection"][Path(ckpt).name] = self.selection(Path(ckpt).name, ckpt, heldout_pairs)
        return self._evaluate(checkpoints)

    def env_eval_targets(self, checkpoints: list[str]) -> list[tuple[str, str]]:
        """(name, checkpoint) of what ``pipeline.eval.stages`` evaluates in the env.

        None when the benchmark has no simulator (``env_factory`` is None: the protocol's one statement of
        it). A pipeline without stages (a prompting baseline) evaluates its initial policy, named ``init``.
        """
        if adapter_of(self.cfg.benchmark).env_factory(self.cfg.benchmark, False) is None:
            return []
        named = [(Path(c).name, c) for c in checkpoints] or [("init", self.init)]
        return {"final": named[-1:], "all": named, "none": []}[self.cfg.pipeline.eval.stages]

    def _evaluate(self, checkpoints: list[str]) -> dict[str, Any]:
        which = self.env_eval_targets(checkpoints)
        if not which and self.cfg.pipeline.eval.stages != "none":
            self.console.print(
                f"[yellow]no env evaluation[/]: benchmark '{self.cfg.benchmark.name}' has no simulator "
                "(held-out selection accuracy is its measure)"
            )
        self.log["eval"] = {name: self.evaluate(name, c) for name, c in which}
        self.log["final_checkpoint"] = checkpoints[-1] if checkpoints else self.init
        self.log["finished"] = time.time()
        history = self.history()
        if history:  # this invocation: it is about to say so in invocations.jsonl
            history[-1].update(ended=self.log["finished"], outcome="finished")
        self.log["history"] = history
        write_text_atomic(self.dir / "run.json", json.dumps(self.log, indent=2, default=str) + "\n")
        return self.log


STEPS = ("pairs", "baseline_data", "selection", "evaluate")


def main(argv: list[str] | None = None) -> int:
    """One GPU step of a run in its own process: ``python -m nemo_act.run.pipeline --run-dir R STEP ARGS``.

    The runner's cluster-engine mode calls this; the config is the run's ``config.yaml``.
    """
    p = argparse.ArgumentParser(prog="python -m nemo_act.run.pipeline")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("step", choices=STEPS)
    p.add_argument("args", nargs="*")
    a = p.parse_args(argv)
    quiet_libraries()
    runner = PipelineRunner(load_config(Path(a.run_dir) / "config.yaml"), a.run_dir, data_dir=a.data_dir)
    runner.isolate = False
    if a.step == "pairs":
        runner.pairs(Path(a.args[0]), a.args[1])
    elif a.step == "baseline_data":
        runner.baseline_data(a.args[0], Path(a.args[1]), a.args[2], a.args[3] or None)
    elif a.step == "selection":
        runner.selection(a.args[0], a.args[1], Path(a.args[2]))
    else:
        runner.evaluate(a.args[0], a.args[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
