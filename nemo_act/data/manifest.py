"""Manifests: a small JSON file beside every artifact saying what made it.

``<artifact>.manifest.json`` holds the kind of artifact, the nemo-act version, the command line,
the inputs (with content hashes), the parameters and the counts. Stages compare manifests to decide
whether an artifact can be reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_act import __version__
from nemo_act.data.io import append_json_line, read_json, write_text_atomic

DIGEST_CACHE_ENV = "NEMO_ACT_DIGEST_CACHE"  # the file of :func:`cached_sha256` (default: the user's cache folder)


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


def digest_cache() -> Path:
    """Where :func:`cached_sha256` keeps its digests: ``$NEMO_ACT_DIGEST_CACHE``, else the user's cache folder."""
    if path := os.environ.get(DIGEST_CACHE_ENV):
        return Path(path)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nemo-act" / "sha256.jsonl"


_KNOWN: dict[tuple[str, int, int], str] = {}  # (resolved path, size, mtime_ns) -> sha256, this process's view
_READ: dict[Path, int] = {}  # cache file -> bytes of it already read into _KNOWN


def _read_cache(cache: Path) -> None:
    """Take in the lines other processes appended since the last read (a torn or foreign line is skipped)."""
    try:
        size = cache.stat().st_size
    except OSError:
        return
    if size == _READ.get(cache):
        return
    with cache.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
                _KNOWN[(rec["path"], int(rec["size"]), int(rec["mtime_ns"]))] = str(rec["sha256"])
            except (ValueError, KeyError, TypeError):
                continue
    _READ[cache] = size


def cached_sha256(path: str | Path) -> str:
    """:func:`file_sha256` of a file, read once per (path, size, modification time) on this machine.

    The digest is appended to :func:`digest_cache` (one JSON line per file version), so a large starting checkpoint
    is hashed once, not by every run that starts from it; a file moved, copied or rewritten is hashed again. A cache
    that cannot be written (a read-only home) only costs the hashing.
    """
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    cache = digest_cache()
    if key not in _KNOWN:
        _read_cache(cache)
    if key not in _KNOWN:
        _KNOWN[key] = file_sha256(p)
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            append_json_line(cache, {"path": key[0], "size": key[1], "mtime_ns": key[2], "sha256": _KNOWN[key]})
        except OSError:
            pass
    return _KNOWN[key]


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
