"""Where nemo-act finds its own files: a source checkout's folders, or the copies the wheel ships.

A checkout (``pip install -e .``) reads ``conf/`` and ``tools/convert/`` at the repository root; an installed
wheel reads the same files from ``nemo_act/conf`` and ``nemo_act/convert_tools`` (package data, see
``pyproject.toml``). ``$NEMO_ACT_CONF`` is a search path (folders separated by ``os.pathsep``, ``:``)
searched before the packaged config, file by file: a user's folder holds only what it adds or overrides
(``benchmark/mybench.yaml``, ``pipeline/mine.yaml``, a preamble), never a copy of ``conf/``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # nemo_act/


def checkout_root() -> Path | None:
    """The source checkout this package runs from, or None for an installed wheel."""
    root = PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "conf" / "config.yaml").is_file() else None


def conf_root() -> Path:
    """The packaged config folder (the checkout's ``conf/`` or the wheel's copy): the last of :func:`conf_roots`."""
    root = checkout_root()
    return root / "conf" if root else PACKAGE / "conf"


def conf_roots() -> list[Path]:
    """The config search path: the folders of ``$NEMO_ACT_CONF`` in order, then the packaged :func:`conf_root`."""
    env = [Path(p).expanduser().resolve() for p in os.environ.get("NEMO_ACT_CONF", "").split(os.pathsep) if p]
    packaged = conf_root().resolve()
    return [p for p in env if p != packaged] + [packaged]


def find_conf(relative: str | Path) -> Path | None:
    """The first file at ``relative`` in the search path (:func:`conf_roots`), or None."""
    for root in conf_roots():
        if (root / relative).is_file():
            return root / relative
    return None


def convert_root() -> Path:
    """The checkpoint converters (the checkout's ``tools/convert`` or the wheel's ``nemo_act/convert_tools``)."""
    root = checkout_root()
    return root / "tools" / "convert" if root else PACKAGE / "convert_tools"
