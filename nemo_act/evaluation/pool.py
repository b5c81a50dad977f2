"""A pool of env worker processes: each holds ``envs_per_worker`` envs (for ScienceWorld, one JVM each).

The rollout loop sends one batch of commands per step to every worker at once and collects the
answers, so env steps of different workers run in parallel while the policy batches its prompts.
A worker that dies (killed, out of memory, a crashed JVM) is restarted with fresh envs; the slots it
held are reported by :meth:`EnvPool.pop_lost_slots` so the caller can restart their episodes.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from typing import Any

Command = tuple[int, str, tuple]  # (local env index, "reset" | "step", args)


def _worker(conn, factory: Callable[[], Any], n_envs: int) -> None:
    envs = [factory() for _ in range(n_envs)]
    try:
        while True:
            msg = conn.recv()
            if msg is None:
                break
            results = []
            for local, method, args in msg:
                try:
                    results.append(("ok", getattr(envs[local], method)(*args)))
                except Exception as err:  # reported to the parent, which names the episode
                    results.append(("error", f"{type(err).__name__}: {err}"))
            conn.send(results)
    finally:
        for env in envs:
            env.close()


class EnvPool:
    """Slots ``0 .. workers * envs_per_worker - 1``, each one env in a worker process.

    Args:
        factory: Picklable callable that builds one env (``reset(...)``, ``step(action)``, ``close()``).
        workers: Worker processes.
        envs_per_worker: Envs each worker holds.
    """

    def __init__(self, factory: Callable[[], Any], workers: int, envs_per_worker: int) -> None:
        self._ctx = mp.get_context("spawn")
        self._factory = factory
        self.envs_per_worker = envs_per_worker
        self.size = workers * envs_per_worker
        self.restarts = 0
        self._lost: set[int] = set()
        self._conns: list[Any] = [None] * workers
        self._procs: list[Any] = [None] * workers
        for w in range(workers):
            self._start(w)

    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child, self._factory, self.envs_per_worker), daemon=True)
        proc.start()
        child.close()  # so a dead worker shows as EOF here
        self._conns[w], self._procs[w] = parent, proc

    def _restart(self, w: int) -> None:
        self._procs[w].kill()
        self._procs[w].join(timeout=30)
        self._conns[w].close()
        self._start(w)
        self.restarts += 1
        self._lost.update(range(w * self.envs_per_worker, (w + 1) * self.envs_per_worker))

    def run(self, calls: dict[int, tuple[str, tuple]]) -> dict[int, Any]:
        """Run ``{slot: (method, args)}`` on the envs, workers in parallel; return ``{slot: result}``.

        Slots of a worker that died are missing from the result; the worker is restarted and all its
        slots (also those not in ``calls``) are listed by :meth:`pop_lost_slots`.

        Raises:
            RuntimeError: An env raised; the message names the slot and the error.
        """
        per_worker: dict[int, list[tuple[int, Command]]] = {}
        for slot, (method, args) in calls.items():
            w, local = divmod(slot, self.envs_per_worker)
            per_worker.setdefault(w, []).append((slot, (local, method, args)))
        dead = set()
        for w, items in per_worker.items():
            try:
                self._conns[w].send([cmd for _, cmd in items])
            except (BrokenPipeError, ConnectionResetError, OSError):
                dead.add(w)
        out: dict[int, Any] = {}
        for w, items in per_worker.items():
            if w in dead:
                continue
            try:
                results = self._conns[w].recv()
            except (EOFError, ConnectionResetError, OSError):
                dead.add(w)
                continue
            for (slot, _), (status, value) in zip(items, results, strict=True):
                if status != "ok":
                    raise RuntimeError(f"env slot {slot}: {value}")
                out[slot] = value
        for w in sorted(dead):
            self._restart(w)
        return out

    def pop_lost_slots(self) -> set[int]:
        """Slots whose env was lost with a dead worker since the last call (their episodes must restart)."""
        lost, self._lost = self._lost, set()
        return lost

    def close(self) -> None:
        """Stop the workers (and their envs)."""
        for conn in self._conns:
            try:
                conn.send(None)
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass
        for proc in self._procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
