"""Which env pool a step gets: worker processes on this node, or Ray actors over the job's nodes (``env.pool``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from nemo_act.evaluation.pool import EnvPool
from nemo_act.evaluation.ray_env_pool import RayEnvPool  # imports Ray: only when asked for


def make_env_pool(
    kind: str, factory: Callable[[], Any], workers: int, envs_per_worker: int, call_timeout: float | None = None
) -> EnvPool:
    """The env pool ``env.pool`` asks for (``auto``: Ray actors when ``RAY_ADDRESS`` is set, else processes).

    Args:
        kind: ``env.pool``.
        factory: Builds one env in a worker.
        workers: Workers.
        envs_per_worker: Envs per worker.
        call_timeout: Deadline of one env call in seconds; None: none.
    """
    if kind == "ray" or (kind == "auto" and os.environ.get("RAY_ADDRESS")):
        return RayEnvPool(factory, workers, envs_per_worker, call_timeout)
    return EnvPool(factory, workers, envs_per_worker, call_timeout)
