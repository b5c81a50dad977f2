"""Env workers as Ray actors spread over a cluster's nodes (``env.pool: ray``): the env pool across nodes.

:class:`RayEnvPool` is :class:`~nemo_act.evaluation.pool.EnvPool` with another transport: each worker is a
Ray actor (one CPU, ``scheduling_strategy="SPREAD"``, so workers land on every node of the job rather than
filling the head's cores first), holding ``envs_per_worker`` envs. Everything else is the pool's own logic:
one batch of calls per worker per env step, the same per-call deadline inside the worker (``setitimer``
with SIGALRM's default action ends the actor's process, even in C code or a JVM round trip), the parent's
deadline per call (each call of a batch is its own actor task, answered in order), a dead worker replaced
with fresh envs and its slots reported for replay, ``imap`` with replays and a final ``failed``.

Actors run the driver's interpreter and environment (``runtime_env.py_executable``, as NeMo-RL's worker
groups do: ``nemo_rl/distributed/worker_groups.py:493,566``; ``actor_env``); the Ray cluster is the one
:func:`nemo_act.generation.ray_pool.connect` attaches to.
"""

from __future__ import annotations

import collections
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from nemo_act.evaluation.env_worker import Command, build_envs, run_commands
from nemo_act.evaluation.pool import EnvPool
from nemo_act.generation.ray_pool import actor_env, actor_label, connect


class _EnvActor:
    """One env worker: ``n_envs`` envs, every call under the deadline (past it, the process ends).

    Built in two calls, ``_EnvActor(what)`` then :meth:`build` (its first task), so that the lines the envs print
    while they start carry the actor's label on the driver's log (``(env worker 3 on node-12 pid=...)``, as
    :class:`~nemo_act.generation.ray_pool.EnginePool`'s engines do).
    """

    def __init__(self, what: str) -> None:
        self.label = actor_label(what)
        self.envs: list[Any] = []
        self.failure: tuple[str, Any] | None = None

    def __repr__(self) -> str:
        return self.label

    def build(self, factory: Callable[[], Any], n_envs: int, call_timeout: float | None) -> None:
        self.envs, self.failure = build_envs(factory, n_envs, call_timeout)

    def run(self, msg: list[Command]) -> list[tuple[str, Any]]:
        return [self.failure] * len(msg) if self.failure else run_commands(self.envs, msg)

    def where(self) -> tuple[str, int]:
        return socket.gethostname(), os.getpid()

    def close(self) -> None:
        for env in self.envs:
            env.close()


class RayEnvPool(EnvPool):
    """:class:`~nemo_act.evaluation.pool.EnvPool` whose workers are Ray actors spread over the nodes.

    Args:
        factory: Picklable callable that builds one env.
        workers: Worker actors (one CPU each).
        envs_per_worker: Envs each worker holds.
        call_timeout: Deadline of one env call in seconds; None: none.
        address: Ray address (see :func:`~nemo_act.generation.ray_pool.connect`).
    """

    def __init__(
        self,
        factory: Callable[[], Any],
        workers: int,
        envs_per_worker: int,
        call_timeout: float | None = None,
        address: str | None = None,
    ) -> None:
        self._address = address
        super().__init__(factory, workers, envs_per_worker, call_timeout)

    def _setup(self) -> None:
        import ray

        connect(self._address, self.workers)
        self._remote = ray.remote(_EnvActor).options(
            num_cpus=1,
            scheduling_strategy="SPREAD",
            max_restarts=0,
            runtime_env={"py_executable": sys.executable, "env_vars": actor_env()},
        )
        self._actors: list[Any] = [None] * self.workers
        self._refs: dict[int, collections.deque[tuple[Any, float]]] = {}  # worker -> (answer ref, sent at), in order
        self._why: dict[int, str] = {}

    def _start(self, w: int) -> None:
        self._actors[w] = self._remote.remote(f"env worker {w}")
        self._actors[w].build.remote(self._factory, self.envs_per_worker, self.call_timeout)  # first in its queue

    def _stop(self, w: int) -> str:
        import ray

        self._refs.pop(w, None)
        ray.kill(self._actors[w], no_restart=True)
        return self._why.pop(w, "env worker died")

    def _send(self, w: int, msg: list[Command]) -> bool:
        now = time.monotonic()  # one task per call: an actor runs its tasks in order, one at a time
        self._refs[w] = collections.deque((self._actors[w].run.remote([command]), now) for command in msg)
        return True

    def _poll(self, ws: list[int], timeout: float | None) -> set[int]:
        import ray

        refs = {self._refs[w][0][0]: w for w in ws if self._refs.get(w)}
        if not refs:
            return set()
        first, _ = ray.wait(list(refs), num_returns=1, timeout=timeout)
        if not first:
            return set()
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
        return {refs[r] for r in ready}

    def _take(self, w: int) -> Any:
        import ray
        from ray.exceptions import RayActorError

        ref, sent = self._refs[w].popleft()
        try:
            return ray.get(ref)[0]
        except RayActorError as err:
            late = self.call_timeout and time.monotonic() - sent >= self.call_timeout
            self._why[w] = (
                "an env call ran past its deadline (env.call_timeout_s)"
                if late
                else f"env worker died ({str(err).splitlines()[0][:200]})"
            )
            raise EOFError("lost") from None

    def where(self) -> list[tuple[str, int]]:
        """Host and pid of every worker."""
        import ray

        return ray.get([a.where.remote() for a in self._actors])

    def _shutdown(self, wait_s: float) -> None:
        import ray

        try:
            ray.get([a.close.remote() for a in self._actors], timeout=wait_s)
        except Exception:  # a dead or hung worker: killed below
            pass
        for a in self._actors:
            ray.kill(a, no_restart=True)
