"""Write the CPU twin's pins from NeMo-RL's own lock: ``requirements.txt`` beside this file.

    python tools/cluster_twin/export_lock.py [--source S]   # S: as NEMO_RL_SOURCE (nemo_rl_source.py), its default

The release image builds its default venv (``/opt/nemo_rl_venv``) with ``uv sync --locked
--all-groups --no-install-project`` after the per-backend syncs (NeMo-RL v0.7.0 ``docker/Dockerfile``,
lines 183-193): no extra, every dependency group. This runs ``uv export`` with the same selection on the
release's ``uv.lock`` (``pip install uv``; uv is not needed to build or test the twin) and rewrites what
PyPI alone cannot serve, each change listed in the file's header:

* ``torch==2.11.0+cu130`` / ``torchvision==0.26.0+cu130`` (the PyTorch CUDA 13.0 index) -> the same
  release from PyPI (CUDA 13.0 too: the same code, other wheel builds);
* ``transferqueue @ git+https://github.com/...`` is left out (no GitHub here or in CI; NeMo-RL imports
  it only when ``data_plane.enabled`` is set, off in every base we use).

The twin installs the list with ``--no-deps``, as ``uv sync`` installs a lock: the exact closure,
nothing resolved again. ``tests/test_cluster_twin.py`` checks every pin against the lock.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from nemo_rl_source import check, read_file, read_pin, read_source, uv_lock

HERE = Path(__file__).resolve().parent
LOCAL_SUFFIX = "+cu130"
LEFT_OUT = {"transferqueue": "git source on GitHub; imported only with data_plane.enabled (off in the bases)"}


def rewrite(exported: str) -> list[str]:
    """The pin lines of a ``uv export`` output, rewritten for PyPI (see the module docstring)."""
    out = []
    for line in exported.splitlines():
        if not line.strip() or line.startswith((" ", "#")):
            continue
        name = line.split("==")[0].split(" @ ")[0].strip()
        if name in LEFT_OUT:
            continue
        out.append(line.replace(LOCAL_SUFFIX, ""))
    return out


def export(source: str) -> str:
    """``uv export`` of the release's lock as its Dockerfile syncs the default venv.

    ``source`` is as ``NEMO_RL_SOURCE``, checked against the pin first.
    """
    src = read_source(source)
    check(src, read_pin())
    with tempfile.TemporaryDirectory() as tmp:  # uv reads pyproject.toml + uv.lock only: nothing else is unpacked
        root = Path(tmp)
        (root / "uv.lock").write_text(uv_lock(src))
        (root / "pyproject.toml").write_text(read_file(src, "pyproject.toml"))
        cmd = ["uv", "export", "--frozen", "--no-emit-project", "--no-hashes", "--all-groups", "--no-header"]
        return subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", default=os.environ.get("NEMO_RL_SOURCE", ""), help="default: $NEMO_RL_SOURCE")
    args = p.parse_args(argv)
    if not args.source:
        p.error("no NeMo-RL source: --source or NEMO_RL_SOURCE (a checkout of the pinned tag or a git archive of it)")
    lines = rewrite(export(args.source))
    pin = read_pin()
    header = [
        f"# NeMo-RL {pin.release}'s default venv, from its uv.lock (commit {pin.commit[:12]})",
        "# made by tools/cluster_twin/export_lock.py:",
        "# uv export --frozen --no-emit-project --no-hashes --all-groups (docker/Dockerfile:193's selection), then:",
        f"#   '{LOCAL_SUFFIX}' local versions -> the same release from PyPI",
        *(f"#   left out: {name} ({why})" for name, why in LEFT_OUT.items()),
        "# Installed with --no-deps (the exact closure, as uv sync installs a lock).",
    ]
    (HERE / "requirements.txt").write_text("\n".join(header + lines) + "\n")
    print(f"{len(lines)} pins -> {HERE / 'requirements.txt'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
