"""Manifests: a small JSON file beside every artifact saying what made it.

``<artifact>.manifest.json`` holds the kind of artifact, the nemo-act version, the command line,
the inputs (with content hashes), the parameters and the counts. Stages compare manifests to decide
whether an artifact can be reused.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_act import __version__
from nemo_act.data.io import read_json, write_text_atomic


@dataclass(frozen=True)
class Summary:
    """What a data step (experts, pairs) produced: its counts, as its manifest records them, and its file."""

    counts: dict[str, Any]
    out: Path


def manifest_path(artifact: str | Path) -> Path:
    """Return the manifest path of an artifact (``<artifact>.manifest.json``)."""
    artifact = Path(artifact)
    return artifact.with_name(artifact.name + ".manifest.json")


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(
    artifact: str | Path,
    kind: str,
    params: dict[str, Any],
    counts: dict[str, int | float],
    inputs: dict[str, str | Path] | None = None,
) -> Path:
    """Write the manifest of ``artifact`` atomically.

    Args:
        artifact: The file the manifest describes (hashed too).
        kind: Artifact kind, e.g. ``experts`` or ``pairs``.
        params: What produced it (policy, sampling, seed, benchmark settings...).
        counts: Numbers a user checks (records, dropped, ...).
        inputs: Named input files; each is recorded with its SHA-256.

    Returns:
        The manifest path.
    """
    artifact = Path(artifact)
    body = {
        "kind": kind,
        "artifact": artifact.name,
        "sha256": file_sha256(artifact),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nemo_act_version": __version__,
        "command": sys.argv,
        "inputs": {name: {"path": str(p), "sha256": file_sha256(p)} for name, p in (inputs or {}).items()},
        "params": params,
        "counts": counts,
    }
    path = manifest_path(artifact)
    write_text_atomic(path, json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    return path


def read_manifest(artifact: str | Path) -> dict[str, Any]:
    """Read the manifest of ``artifact``."""
    return read_json(manifest_path(artifact))


def reusable(artifact: str | Path, kind: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """Return the manifest of ``artifact`` when it is finished and was made with ``params``, else None.

    An artifact is reusable when it exists, its manifest has the same kind and parameters, and its
    bytes still hash to the manifest's SHA-256 (nobody edited or truncated it since).
    """
    artifact = Path(artifact)
    if not artifact.exists() or not manifest_path(artifact).exists():
        return None
    manifest = read_manifest(artifact)
    if manifest.get("kind") != kind or manifest.get("params") != json.loads(json.dumps(params)):
        return None
    if manifest.get("sha256") != file_sha256(artifact):
        return None
    return manifest
