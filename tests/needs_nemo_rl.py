"""NeMo-RL for the tests that run its code: imported where it is, a skip with the reason where it is not.

NeMo-RL is not on PyPI and never kept here: ``make test-cluster NEMO_RL_SOURCE=<a checkout of the pinned tag>``
puts the user's copy on the twin's path (tools/cluster_twin/nemo_rl_source.py). Inside that lane
(``NEMO_ACT_CLUSTER_TWIN=1``) a missing NeMo-RL is a failure, never a skip: the lane exists to run these tests.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "cluster_twin"))
import nemo_rl_source  # noqa: E402  (tools/cluster_twin: standard library only)


def in_twin_lane() -> bool:
    """Whether this run is ``make test-cluster`` (or ``test-cluster-image``), where nothing may skip."""
    return os.environ.get("NEMO_ACT_CLUSTER_TWIN") == "1"


def import_nemo_rl() -> ModuleType:
    """``nemo_rl``, or a skip naming how to get it (a failure in the twin lane)."""
    try:
        return importlib.import_module("nemo_rl")
    except ImportError as err:
        reason = f"NeMo-RL is not importable ({err}): {nemo_rl_source.why()}"
        if in_twin_lane():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def named_source() -> nemo_rl_source.Source:
    """The NeMo-RL source the lane was given (``NEMO_RL_SOURCE``), read and checked against the pin; else a skip
    (a failure in the twin lane)."""
    spec = os.environ.get("NEMO_RL_SOURCE", "")
    if not spec:
        reason = f"NEMO_RL_SOURCE is not set: {nemo_rl_source.why()}"
        if in_twin_lane():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    source = nemo_rl_source.read_source(spec)
    nemo_rl_source.check(source, nemo_rl_source.read_pin())
    return source
