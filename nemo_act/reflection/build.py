"""What every reflection-baseline builder shares: reuse, guard and resume a build, state by state.

A build folder holds its intermediate files (resumable) and its audit file with a manifest. A finished
audit file made with the same parameters is reused; an unfinished build resumes only with the parameters
it was started with (``params.json.partial``); a new build clears what an earlier one left in the folder,
so no intermediate of another policy or config is mixed in. :func:`per_state` runs one step over every
state on a fixed grid of chunks (so a resumed run asks for the same batches) and appends each chunk's records.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from nemo_act.data.io import ResumableJsonl, write_text_atomic
from nemo_act.data.manifest import Summary, reusable
from nemo_act.prompts.state import state_id

PARAMS = "params.json.partial"


def begin(folder: Path, out: Path, kind: str, params: dict[str, Any], leftovers: Sequence[str]) -> Summary | None:
    """Start (or resume) a build in ``folder`` whose audit file is ``out``.

    Args:
        folder: The build folder.
        out: Its audit file.
        kind: The manifest kind (``early_experience``, ``agent_r``).
        params: Everything the build's result depends on.
        leftovers: Files and folders of the build, cleared when a new build starts here.

    Returns:
        The finished build's summary when it can be reused, else None (then build, and call :func:`end`).

    Raises:
        ValueError: An unfinished build with other parameters is in the folder.
    """
    finished = reusable(out, kind, params)
    if finished is not None:
        return Summary(counts=finished["counts"], out=out)
    path = folder / PARAMS
    if path.exists():
        old = json.loads(path.read_text())
        if old != json.loads(json.dumps(params)):
            diff = sorted(k for k in set(old) | set(params) if old.get(k) != params.get(k))
            raise ValueError(f"{path}: an unfinished build with other parameters ({', '.join(diff)}) is in this folder")
        return None
    folder.mkdir(parents=True, exist_ok=True)
    for name in leftovers:
        target = folder / name
        if target.is_dir():
            shutil.rmtree(target)
        for suffix in ("", ".partial", ".manifest.json"):
            (folder / f"{name}{suffix}").unlink(missing_ok=True)
    write_text_atomic(path, json.dumps(params, indent=2, sort_keys=True) + "\n")
    return None


def end(folder: Path) -> None:
    """Mark the build finished (its audit file and manifest are written)."""
    (folder / PARAMS).unlink(missing_ok=True)


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
