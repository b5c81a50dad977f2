"""What every reflection-baseline builder does first and last: reuse a finished build, guard an unfinished one.

A build folder holds its intermediate files (resumable) and its audit file with a manifest. A finished
audit file made with the same parameters is reused; an unfinished build resumes only with the parameters
it was started with (``params.json.partial``); a new build clears what an earlier one left in the folder,
so no intermediate of another policy or config is mixed in.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nemo_act.data.io import write_text_atomic
from nemo_act.data.manifest import Summary, reusable

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
