"""The runner's one cache rule: when a stage, a held-out selection or an evaluation is reused, resumed or redone.

Each result keeps a record beside it (a stage's ``stage.json``, a selection's JSON, an evaluation's
``started.json`` then ``summary.json``) with two things: its **fingerprint**, one hash (:func:`fingerprint`) of
everything but weights that makes it what it is (inputs, data, config), and the **weights** it was made with
(the sha256 of each weight file a selection or an evaluation loaded; the size, time and sha256 of each weight
file a stage wrote). :func:`decide` reads a record against now:

- nothing recorded: start (``resume``, from nothing);
- the weights differ from the record (read: other bytes in the checkpoint; written: a file cut short or
  edited) or the fingerprint differs: ``redo``, saying why (the runner clears what was there);
- else ``reuse`` when it finished, ``resume`` when it did not (a stage from its last checkpoint, an
  evaluation from its played episodes).

The data steps (experts, pairs, the reflection baselines' builds) keep their parameters in their manifests
and are reused the same way, by :class:`~nemo_act.data.resumable.ResumableStep`.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from nemo_act.common.numerics import PORTABLE
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import read_json
from nemo_act.data.manifest import cached_sha256, file_sha256
from nemo_act.engines import engine_for
from nemo_act.stage_data import stage_config
from nemo_act.stage_kinds import DATA_KINDS, stage_kind

Decision = Literal["reuse", "resume", "redo"]
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")  # not training_args.bin, which is no weights
EVAL_STARTED = "started.json"  # in an evaluation's folder: what its episodes are played with, before the first one


def fingerprint(parts: Any) -> str:
    """The one fingerprint of every cached result: a short sha256 of its parts as sorted JSON."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def decide(record: dict[str, Any] | None, fp: str, finished: bool, weights: str | None) -> tuple[Decision, str]:
    """What to do with a result whose record is ``record``: the runner's one rule.

    Args:
        record: Its record (None: nothing there yet).
        fp: Its fingerprint now.
        finished: Whether the record says it finished.
        weights: Why its weights are not the recorded ones (:func:`read_weights_differ`,
            :func:`written_weights_differ`), or None.

    Returns:
        ``reuse``, ``resume`` or ``redo``, and why (empty for ``resume``).
    """
    if record is None:
        return "resume", ""
    if weights is not None:
        return "redo", weights
    if record.get("fingerprint") != fp:
        return "redo", "its inputs, its data or its config changed"
    return ("reuse", "finished with the same inputs, weights and config") if finished else ("resume", "")


def _is_weights(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in WEIGHT_FILES)


def weights_record(folder: Path) -> dict[str, list[Any]]:
    """A checkpoint's weight files as ``{name: [size, mtime_ns, sha256]}`` (what ``stage.json`` keeps)."""
    out: dict[str, list[Any]] = {}
    for pattern in WEIGHT_FILES:
        for p in sorted(folder.glob(pattern)):
            st = p.stat()
            out[p.name] = [st.st_size, st.st_mtime_ns, file_sha256(p)]
    return out


def weights_changed(folder: Path, recorded: dict[str, list[Any]]) -> str | None:
    """What differs between a finished stage's weight files and its record, or None.

    Sizes are always compared; a file's digest is computed again only when its modification time moved (a copy,
    an edit), so skipping a finished 16 GB stage reads its weights only when something touched them.
    """
    recorded = {name: rec for name, rec in recorded.items() if _is_weights(name)}  # older records: training_args.bin
    names = {p.name for pattern in WEIGHT_FILES for p in folder.glob(pattern)}
    if names != set(recorded):
        return f"weight files {sorted(names)} where it finished with {sorted(recorded)}"
    for name, (size, mtime, digest) in recorded.items():
        st = (folder / name).stat()
        if st.st_size != size:
            return f"{name} is {st.st_size:,} bytes, {size:,} when it finished (cut short?)"
        if st.st_mtime_ns != mtime and file_sha256(folder / name) != digest:
            return f"{name} has other bytes than when it finished"
    return None


def written_weights_differ(folder: Path, record: dict[str, Any]) -> str | None:
    """Why a finished stage's weights are not the ones it wrote (:func:`weights_changed`), or None."""
    if not record.get("complete") or "weights" not in record:
        return None
    return weights_changed(folder, record["weights"])


def weights_digest(checkpoint: str) -> dict[str, str]:
    """The sha256 of each weight file a checkpoint loads ({} for a hub name).

    What an evaluation or a held-out selection of the checkpoint records, and is redone when it differs. A finished
    stage's digests come from its ``stage.json`` (a file is hashed again only when its size or time moved since, as
    :func:`weights_changed` does); any other folder's are computed.
    """
    folder = Path(checkpoint)
    if not folder.is_dir():
        return {}
    marker = folder / "stage.json"
    recorded = read_json(marker).get("weights") if marker.exists() else None
    if not recorded or weights_changed(folder, recorded) is not None:
        recorded = weights_record(folder)
    return {name: rec[2] for name, rec in sorted(recorded.items()) if _is_weights(name)}


def read_weights_differ(record: dict[str, Any], weights: dict[str, str]) -> str | None:
    """Why the weights a selection or an evaluation recorded are not ``weights`` (the checkpoint's now), or None."""
    if record.get("weights") == weights:
        return None
    if "weights" not in record:
        return "it does not record the weights it used (written by an older nemo-act)"
    return "its checkpoint's weights are not the ones it used (sha256 differs)"


def checkpoint_fingerprint(path: str) -> str:
    """Fingerprint of a starting checkpoint: a stage's own fingerprint, a folder's content, or a hub name.

    A folder that is no stage (the tiny model, a warm-up, a user's HF folder) is known by what it holds: the name
    and sha256 of each file in it (hidden ones aside), not by where it lies, so a run folder moved or copied to
    another path reuses what it finished. Each file is hashed once per path, size and time
    (:func:`~nemo_act.data.manifest.cached_sha256`).
    """
    stage_file = Path(path) / "stage.json"
    if stage_file.exists():
        return read_json(stage_file)["fingerprint"]
    folder = Path(path)
    if folder.is_dir():
        files = sorted((p.name, cached_sha256(p)) for p in folder.iterdir() if p.is_file() and p.name[0] != ".")
        return fingerprint({"files": files})
    return fingerprint(path)


def stage_fingerprint(kind: str, init: str, data: Path, cfg: ExperimentConfig) -> str:
    """Everything that makes a stage's output what it is."""
    block = DATA_KINDS[stage_kind(kind).data].config
    return fingerprint(
        {
            **({"data_config": getattr(cfg, block).model_dump()} if block else {}),
            "kind": kind,
            "init": checkpoint_fingerprint(init),
            "data": file_sha256(data),
            "train": stage_config(kind, cfg).model_dump(),
            "prompt": cfg.prompt.model_dump(),
            "rewards": cfg.rewards.model_dump(),
            "benchmark": cfg.benchmark.model_dump(),
            "thinking": cfg.model.enable_thinking,
            "seed": cfg.seed,
            **({"finetune": cfg.model.finetune.model_dump()} if cfg.model.finetune else {}),  # unset: as before it was
            **_numerics(cfg),
            **engine_for(cfg).fingerprint(cfg),
        }
    )


def selection_fingerprint(checkpoint: str, heldout_pairs: Path, cfg: ExperimentConfig) -> str:
    """Everything but the weights that makes a held-out selection what it is."""
    return fingerprint(
        {
            "checkpoint": checkpoint_fingerprint(checkpoint),
            "pairs": file_sha256(heldout_pairs),
            "sampling": cfg.eval.sampling.model_dump(),
            "max_new_tokens": cfg.eval.selection_max_new_tokens,
            "prompt": cfg.prompt.model_dump(),
            "thinking": cfg.model.enable_thinking,
            "seed": cfg.seed,
            **_numerics(cfg),
        }
    )


def eval_fingerprint(checkpoint: str, cfg: ExperimentConfig) -> str:
    """Everything but the weights that makes an env evaluation what it is."""
    ev = cfg.pipeline.eval
    return fingerprint(
        {
            "checkpoint": checkpoint_fingerprint(checkpoint),
            "episodes": {
                "split": ev.split,
                "tasks": ev.tasks,
                "max_variations": ev.max_variations,
                **({"max_tasks": cfg.max_tasks} if cfg.max_tasks is not None else {}),
            },
            "eval": cfg.eval.model_dump(exclude={"selection_max_new_tokens"}),
            "prompt": cfg.prompt.model_dump(),
            "benchmark": cfg.benchmark.model_dump(),
            "thinking": cfg.model.enable_thinking,
            **_numerics(cfg),
        }
    )


def _numerics(cfg: ExperimentConfig) -> dict[str, Any]:
    """The CPU float paths, when not the native ones (results made before the setting existed keep their prints).

    Portable names its variables: a result made when ``portable`` meant other paths is not reused.
    """
    return {"cpu_numerics": cfg.cpu_numerics, "paths": PORTABLE} if cfg.cpu_numerics != "native" else {}


def stage_complete(folder: Path) -> bool:
    """True when a stage folder's ``stage.json`` says the stage finished."""
    marker = folder / "stage.json"
    return marker.exists() and read_json(marker)["complete"]
