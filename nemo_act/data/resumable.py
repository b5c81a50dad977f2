"""One resumable step's bookkeeping: reuse a finished output, guard an unfinished one, finish with a manifest.

Every step that writes an artifact over many units of work (expert episodes, pair states, a reflection
baseline's build) does the same four things, here and nowhere else:

1. a finished output whose manifest has the same kind and parameters (and whose bytes still hash to it) is
   reused (:meth:`ResumableStep.reused`);
2. an unfinished one resumes only with the parameters it was started with: they sit in a guard file
   (``<out>.params.json.partial``, or ``params.json.partial`` in a build folder) and a run with others is
   refused, naming the differing keys (:meth:`ResumableStep.begin`); a new run first clears the files an
   earlier one left (``leftovers``), so nothing of another policy or config is mixed in;
3. the units themselves are appended to a :class:`~nemo_act.data.io.ResumableJsonl` (partial file, done
   keys, durable appends, a torn last line dropped);
4. the output and its manifest are written, then the guard removed (:meth:`ResumableStep.finish`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_act.data.io import write_text_atomic
from nemo_act.data.manifest import Summary, reusable, write_manifest

GUARD = "params.json.partial"


@dataclass(frozen=True)
class ResumableStep:
    """One step's output, the parameters it depends on, and where an unfinished run records them.

    Build one with :meth:`beside` (the guard next to the output) or :meth:`in_folder` (a build folder).

    Attributes:
        out: The artifact the step writes (its manifest goes beside it).
        kind: The manifest kind (``experts``, ``pairs``, ``sand``, ...).
        params: Everything the output depends on (the manifest's ``params``).
        guard: The file that holds an unfinished run's parameters.
        leftovers: Files and folders an earlier run left, cleared when a new run starts (with their
            ``.partial`` and ``.manifest.json`` siblings).
    """

    out: Path
    kind: str
    params: dict[str, Any]
    guard: Path
    leftovers: tuple[Path, ...] = field(default=())

    @classmethod
    def beside(cls, out: str | Path, kind: str, params: dict[str, Any]) -> ResumableStep:
        """A step whose guard is ``<out>.params.json.partial``."""
        out = Path(out)
        return cls(out, kind, params, out.with_name(f"{out.name}.{GUARD}"))

    @classmethod
    def in_folder(
        cls, folder: str | Path, out: str | Path, kind: str, params: dict[str, Any], leftovers: Sequence[str] = ()
    ) -> ResumableStep:
        """A step that builds in ``folder`` (guard ``<folder>/params.json.partial``; ``leftovers`` named in it)."""
        folder = Path(folder)
        return cls(Path(out), kind, params, folder / GUARD, tuple(folder / name for name in leftovers))

    def reused(self) -> Summary | None:
        """The finished output's counts when it was made with these parameters, else None."""
        finished = reusable(self.out, self.kind, self.params)
        return None if finished is None else Summary(counts=finished["counts"], out=self.out)

    def begin(self) -> None:
        """Start a run, or resume the unfinished one if it has these parameters.

        Raises:
            ValueError: An unfinished run with other parameters is in progress (its guard file and the keys
                that differ are named).
        """
        params = json.loads(json.dumps(self.params))  # as the guard file holds them (tuples are lists there)
        if self.guard.exists():
            old = json.loads(self.guard.read_text())
            if old != params:
                diff = sorted(k for k in set(old) | set(params) if old.get(k) != params.get(k))
                raise ValueError(
                    f"{self.guard}: an unfinished run with other parameters ({', '.join(diff)}) is in progress "
                    f"for {self.out}; re-run with the same parameters, or delete its .partial files to start over"
                )
            return
        for target in self.leftovers:
            if target.is_dir():
                shutil.rmtree(target)
            for suffix in ("", ".partial", ".manifest.json"):
                target.with_name(target.name + suffix).unlink(missing_ok=True)
        write_text_atomic(self.guard, json.dumps(params, indent=2, sort_keys=True) + "\n")

    def finish(self, counts: dict[str, Any], inputs: dict[str, str | Path] | None = None) -> Summary:
        """Write the output's manifest (the output itself is written) and end the run.

        Args:
            counts: The manifest's counts.
            inputs: Files the output was made from (hashed into the manifest).

        Returns:
            The counts and the output path.
        """
        write_manifest(self.out, self.kind, params=self.params, counts=counts, inputs=inputs)
        self.guard.unlink(missing_ok=True)
        return Summary(counts=counts, out=self.out)
