"""What every reflection-baseline builder shares: one step over every state, resumed chunk by chunk.

A build folder holds its intermediate files (resumable) and its audit file with a manifest; reusing a
finished build, guarding an unfinished one's parameters and clearing an earlier build's files is
:meth:`~nemo_act.data.resumable.ResumableStep.in_folder`'s, as for every resumable step. :func:`per_state`
runs one step over every state on a fixed grid of chunks (so a resumed run asks for the same batches) and
appends each chunk's records; :func:`params` and :func:`begin` are what every build depends on and starts with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import ResumableJsonl, read_all
from nemo_act.data.manifest import file_sha256
from nemo_act.data.records import Trajectory
from nemo_act.data.resumable import ResumableStep
from nemo_act.prompts.state import state_id
from nemo_act.steps.branching import require_episodes


def params(cfg: ExperimentConfig, block: str, experts: Path, **models: str) -> dict[str, Any]:
    """What a reflection build's output depends on (its manifest's ``params``).

    Args:
        cfg: Experiment config.
        block: The build's own config block (``early_experience``, ``sand``, ``agent_r``).
        experts: The expert trajectories it reads (their digest is a parameter).
        **models: The models it calls, by role (``policy=``, ``critic=``).
    """
    return {
        **models,
        block: getattr(cfg, block).model_dump(),
        "prompt": cfg.prompt.model_dump(),
        "benchmark": cfg.benchmark.model_dump(),
        "enable_thinking": cfg.model.enable_thinking,
        "experts_sha256": file_sha256(experts),
    }


def begin(step: ResumableStep, experts: Path, method: str) -> list[Trajectory]:
    """Start (or resume) a build's step and read its expert episodes, each checked to name its env episode.

    Args:
        step: The build's step, not reusable (:meth:`~nemo_act.data.resumable.ResumableStep.reused` was None).
        experts: Expert trajectories file.
        method: The baseline's name, for the error an episode without a variation raises.
    """
    step.begin()
    trajectories = read_all(experts, Trajectory, "expert trajectories")
    require_episodes(trajectories, experts, method)
    return trajectories


def per_state(
    out: Path,
    record: type,
    states: Sequence[tuple[Any, int]],
    chunk: int,
    work: Callable[[list[tuple[Any, int]]], list[Any]],
    desc: str,
    progress: bool,
    finish: bool,
) -> list[Any]:
    """Run ``work`` over the states not yet in ``out``, a chunk at a time, appending each chunk's records.

    Args:
        out: JSONL of records keyed by ``state_id`` (``<out>.partial`` while unfinished).
        record: The record type (validated on resume).
        states: (trajectory, step index) of every state, in order.
        chunk: States per call of ``work``, on a fixed grid over ``states``.
        work: Makes the records of a list of states (one per state).
        desc: Progress bar label.
        progress: Show the bar.
        finish: Move the file to ``out`` at the end (else it stays partial until the build finishes).

    Returns:
        Every state's record, in state order.
    """
    with ResumableJsonl(out, record, key="state_id") as log:
        done = log.done_keys
        bar = tqdm(total=len(states), initial=len(done), desc=desc, unit="state", disable=not progress)
        with bar:
            for start in range(0, len(states), chunk):
                todo = [(t, i) for t, i in states[start : start + chunk] if state_id(t, i) not in done]
                if todo:
                    log.append(work(todo))
                    bar.update(len(todo))
        records = log.ordered(state_id(t, i) for t, i in states)
        if finish:
            log.finish()
        else:
            log.close()
    return records


def dropped(records: Iterable[Any]) -> dict[str, int]:
    """How many records were not kept, per reason, sorted by reason: every audit file's ``dropped`` count."""
    return dict(sorted(Counter(r.reason for r in records if not r.kept).items()))
