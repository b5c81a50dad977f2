"""Collect expert trajectories from a benchmark (``nemo-act experts``).

Episodes run in the env worker pool of evaluation (:class:`~nemo_act.evaluation.pool.EnvPool`; each
worker holds one env, for ScienceWorld one JVM), one whole episode per call; every env call inside it has
the ``env.call_timeout_s`` deadline, and an episode whose worker hangs or dies is replayed on a new one
up to ``env.max_restarts`` times, then counted as failed with the reason. Every finished episode is
appended to ``<out>.episodes.jsonl.partial`` at once, so a crashed or killed run
resumes where it stopped; at the end the won trajectories go to ``<out>`` atomically (in episode
order; gzip-compressed when it ends in ``.gz``), with a manifest that counts episodes, failures and
how gold actions matched the valid list, and the partial log is removed.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from tqdm import tqdm

from nemo_act.benchmarks.base import adapter_of, check_env
from nemo_act.config.schema import BenchmarkConfigBase, ExperimentConfig
from nemo_act.data.io import ResumableJsonl, read_jsonl, write_jsonl
from nemo_act.data.manifest import Summary, file_sha256, read_manifest
from nemo_act.data.records import Trajectory
from nemo_act.data.resumable import ResumableStep
from nemo_act.evaluation.env_pools import make_env_pool
from nemo_act.evaluation.env_worker import with_deadline
from nemo_act.evaluation.rollout import list_episodes


class EpisodeOutcome(BaseModel):
    """One played expert episode (a line of ``<out>.episodes.jsonl``)."""

    model_config = ConfigDict(extra="forbid")

    trajectory_id: str
    trajectory: Trajectory | None  # None: the episode could not be played (``lost`` says why)
    stats: dict[str, Any] | None = None  # the adapter's counts, e.g. how ScienceWorld gold actions matched the list
    attempts: int = 1  # ALFWorld: tries of the randomised handcoded expert
    lost: str | None = None  # why the episode could not be played (its env kept hanging or dying)


class ExpertPlayer:
    """Plays expert episodes in one env of a pool worker (picklable: built there from the benchmark config).

    Args:
        cfg: The benchmark; its adapter's ``expert_env`` and ``play_expert`` do the playing.
        call_timeout: Deadline of every env call (``env.call_timeout_s``), see :func:`with_deadline`.
    """

    def __init__(self, cfg: BenchmarkConfigBase, call_timeout: float | None) -> None:
        self.cfg = cfg
        self._raw = check_env(adapter_of(cfg).expert_env(cfg), f"{cfg.adapter}.expert_env")
        self.env = with_deadline(self._raw, call_timeout)

    def play(self, task: str, variation: int, split: str) -> str:
        """One expert episode as an :class:`EpisodeOutcome` (JSON: it crosses the process boundary)."""
        traj, stats, attempts = adapter_of(self.cfg).play_expert(self.env, self.cfg, task, variation, split)
        return EpisodeOutcome(
            trajectory_id=traj.trajectory_id, trajectory=traj, stats=stats, attempts=attempts
        ).model_dump_json()

    def close(self) -> None:
        """Close the env."""
        self._raw.close()


def data_warnings(cfg: ExperimentConfig, experts: str | Path) -> list[str]:
    """The warnings an experts file's manifest records, each with what fixes it.

    Lines of the source left out (``benchmark.on_bad_trace: skip``) and the benchmark's own (``expert_warnings(counts)``
    of its adapter, e.g. a traces file whose tasks sit in several splits). ``nemo-act experts``, ``run`` and ``pairs``
    print them.

    Args:
        cfg: Experiment config (its benchmark's adapter).
        experts: An experts file with its manifest.

    Returns:
        One line per warning (none for a file without a manifest).
    """
    try:
        counts = read_manifest(experts).get("counts", {})
    except FileNotFoundError:
        return []
    lines = []
    if counts.get("skipped"):
        kinds = ", ".join(f"{n} x {reason}" for reason, n in counts["skipped"].items())
        lines.append(f"lines of the source left out (benchmark.on_bad_trace=skip): {kinds}; the manifest of {experts} "
                     "lists their numbers, benchmark.on_bad_trace=stop names the first")  # fmt: skip
    own = getattr(adapter_of(cfg.benchmark), "expert_warnings", None)
    return lines + (own(counts) if own else [])


def collect_experts(
    cfg: ExperimentConfig,
    split: str,
    out: str | Path,
    tasks: Sequence[str] | None = None,
    max_variations: int | None = None,
    workers: int = 1,
    progress: bool = True,
) -> Summary:
    """Replay expert episodes of a split and write the won ones as trajectories.

    Args:
        cfg: Experiment config (``benchmark`` chooses the adapter).
        split: Benchmark split.
        out: Trajectories JSONL to write (manifest beside it).
        tasks: Restrict to these tasks.
        max_variations: Variations per task (None: the benchmark's own default, e.g. its ``max_variations``).
        workers: Env worker processes.
        progress: Show a progress bar.

    Returns:
        Counts and output path. A finished ``out`` made with the same parameters is reused.
    """
    bench = cfg.benchmark
    out = Path(out)
    module = adapter_of(bench)
    if not bench.live_experts:  # the one rule (benchmarks.base.plays_experts), also what preflight reads
        return _experts_from_files(bench, split, out)
    params = {
        "adapter_version": module.ADAPTER_VERSION,
        "benchmark": bench.model_dump(),
        "split": split,
        "tasks": list(tasks) if tasks else None,
        "max_variations": max_variations,
        **({"max_tasks": cfg.max_tasks} if cfg.max_tasks is not None else {}),  # absent: files made without it match
    }
    step = ResumableStep.beside(out, "experts", params)
    finished = step.reused()
    if finished is not None:
        return finished
    # the same episode list evaluation plays; fails on bad input before anything is written
    episodes = list_episodes(cfg, split, tasks, max_variations)
    step.begin()
    episodes_file = out.with_name(out.name + ".episodes.jsonl")
    ids = [f"{bench.name}/{t}/{v}" for t, v in episodes]
    with ResumableJsonl(episodes_file, EpisodeOutcome, key="trajectory_id") as log:
        done = log.done_keys
        todo = [(t, v) for t, v in episodes if f"{bench.name}/{t}/{v}" not in done]
        bar = tqdm(
            total=len(episodes), initial=len(episodes) - len(todo), desc=f"experts {split}", disable=not progress
        )
        # the pool itself sets no deadline on `play` (a whole episode): the player times each env call
        player = functools.partial(ExpertPlayer, bench, cfg.env.call_timeout_s)
        with bar, make_env_pool(cfg.env.pool, player, min(workers, max(len(todo), 1)), 1) as pool:
            calls = (((t, v), "play", (t, v, split)) for t, v in todo)
            for (t, v), status, value in pool.imap(calls, cfg.env.max_restarts):
                if status == "error":
                    raise RuntimeError(f"expert episode {bench.name}/{t}/{v}: {value}")
                if status == "ok":
                    log.append([EpisodeOutcome.model_validate_json(value)])
                else:
                    log.append([_lost_episode(bench.name, t, v, value)])
                won = sum(_won(o) for o in log.records)
                bar.set_postfix(won=f"{won}/{len(log.records)}")
                bar.update(1)
    outcomes = log.ordered(ids)
    won = [o.trajectory for o in outcomes if o.trajectory is not None and o.trajectory.success]
    write_jsonl(out, won)
    summary = step.finish(_counts(outcomes, won))
    log.discard()  # every episode is now in `out` or counted in the manifest
    return summary


def merge_counts(stats: Sequence[dict[str, Any]], examples: int = 20) -> dict[str, Any]:
    """Episodes' counts summed key by key (lists, e.g. example actions, are joined and cut to ``examples``)."""
    out: dict[str, Any] = {}
    for st in stats:
        for key, value in st.items():
            if isinstance(value, list):
                out[key] = (out.get(key, []) + value)[:examples]
            else:
                out[key] = out.get(key, 0) + value
    return out


def _lost_episode(benchmark: str, task: str, variation: int, reason: str) -> EpisodeOutcome:
    """The outcome of an episode whose env kept hanging or dying: no trajectory, the reason."""
    return EpisodeOutcome(trajectory_id=f"{benchmark}/{task}/{variation}", trajectory=None, lost=reason)


def _won(o: EpisodeOutcome) -> bool:
    return o.trajectory is not None and o.trajectory.success


def _counts(outcomes: Sequence[EpisodeOutcome], won: Sequence[Trajectory]) -> dict[str, Any]:
    counts = {
        "episodes": len(outcomes),
        "won": len(won),
        "failed": [o.trajectory_id for o in outcomes if not _won(o)],
        "lost": {o.trajectory_id: o.lost for o in outcomes if o.lost},
        "steps": sum(len(t.steps) for t in won),
        "steps_admissible": sum(s.action_admissible for t in won for s in t.steps),
    }
    stats = [o.stats for o in outcomes if o.stats is not None]
    if stats:
        counts |= merge_counts(stats)
    else:
        counts["attempts"] = sum(o.attempts for o in outcomes)
    return counts


def _experts_from_files(cfg: BenchmarkConfigBase, split: str, out: Path) -> Summary:
    """Experts the adapter reads from files (e.g. WebShop's human sessions): all of them, with their score."""
    trajs, source = adapter_of(cfg).read_experts(cfg, split)
    skipped: dict[str, list[int]] = source.pop("skipped", {})  # bad lines an adapter was told to skip
    extra: dict[str, Any] = source.pop("counts", {})  # what the adapter counts beside (e.g. traces' groups)
    shown_as = source.pop("shown_as", "the data")  # how messages name the source (a file)
    step = ResumableStep.beside(out, "experts", {"benchmark": cfg.model_dump(), "split": split, **source})
    finished = step.reused()
    if finished is not None:
        return finished
    for reason, lines in skipped.items():
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        print(f"skipped {len(lines)} line(s) of {shown_as}: {reason} (line {shown})",
              file=sys.stderr)  # fmt: skip
    write_jsonl(out, trajs)
    counts = {
        "episodes": len(trajs),
        "won": sum(t.success for t in trajs),
        "failed": [],
        "steps": sum(len(t.steps) for t in trajs),
        "steps_admissible": sum(s.action_admissible for t in trajs for s in t.steps),
        "mean_score": sum(t.score for t in trajs) / len(trajs) if trajs else 0.0,
        **({"skipped": {reason: len(lines) for reason, lines in skipped.items()}} if skipped else {}),
        **extra,
    }
    return step.finish(counts)


def import_rollouts(cfg: ExperimentConfig, rollouts: str | Path, out: str | Path) -> Summary:
    """Take expert trajectories from another policy's rollouts (e.g. a GiGPO model's, run on a cluster).

    The file holds trajectories in our schema (validated on read: a bad line fails with file, line and
    field). Only successful ones of ``cfg.benchmark`` are kept; the manifest counts what was dropped
    and how many kept steps took an action outside the listed admissible actions.

    Args:
        cfg: Experiment config (``benchmark.name`` must match the trajectories').
        rollouts: Trajectory JSONL (``.gz`` too).
        out: Experts JSONL to write (manifest beside it).

    Returns:
        Counts and output path. A finished ``out`` imported from the same file (same bytes) is reused.

    Raises:
        FileNotFoundError: ``rollouts`` does not exist.
        RecordError: A line is not a valid trajectory.
        ValueError: A trajectory belongs to another benchmark.
    """
    rollouts, out = Path(rollouts), Path(out)
    if not rollouts.is_file():
        raise FileNotFoundError(f"{rollouts}: no such trajectories file (experts from rollouts)")
    params = {"from_rollouts": str(rollouts), "benchmark": cfg.benchmark.name, "sha256": file_sha256(rollouts)}
    step = ResumableStep.beside(out, "experts", params)
    finished = step.reused()
    if finished is not None:
        return finished
    trajs = list(read_jsonl(rollouts, Trajectory))
    other = sorted({t.benchmark for t in trajs} - {cfg.benchmark.name})
    if other:
        raise ValueError(f"{rollouts}: trajectories of {other} given for benchmark '{cfg.benchmark.name}'")
    kept = [t for t in trajs if t.success]
    write_jsonl(out, kept)
    counts = {
        "episodes": len(trajs),
        "won": len(kept),
        "failed": [t.trajectory_id for t in trajs if not t.success],
        "steps": sum(len(t.steps) for t in kept),
        "steps_admissible": sum(s.action_admissible for t in kept for s in t.steps),
        "sources": sorted({t.source for t in kept}),
    }
    return step.finish(counts, inputs={"rollouts": rollouts})
