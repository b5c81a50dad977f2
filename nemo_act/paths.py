"""Where nemo-act finds its own files: a source checkout's folders, or the copies the wheel ships.

A checkout (``pip install -e .``) reads ``conf/`` and ``tools/convert/`` at the repository root; an installed
wheel reads the same files from ``nemo_act/conf`` and ``nemo_act/convert_tools`` (package data, see
``pyproject.toml``). ``$NEMO_ACT_CONF`` points at another config folder.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def checkout_root() -> Path | None:
    """The source checkout this package runs from, or None for an installed wheel."""
    root = PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "conf" / "config.yaml").is_file() else None


def conf_root() -> Path:
    """The folder holding the YAML configs (``$NEMO_ACT_CONF``, the checkout's ``conf/``, or the wheel's copy)."""
    env = os.environ.get("NEMO_ACT_CONF")
    if env:
        return Path(env)
    root = checkout_root()
    return root / "conf" if root else PACKAGE / "conf"


def convert_root() -> Path:
    """The checkpoint converters (the checkout's ``tools/convert`` or the wheel's ``nemo_act/convert_tools``)."""
    root = checkout_root()
    return root / "tools" / "convert" if root else PACKAGE / "convert_tools"
