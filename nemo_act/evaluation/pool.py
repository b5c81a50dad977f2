"""A pool of env worker processes: each holds ``envs_per_worker`` envs (for ScienceWorld, one JVM each).

Evaluation and expert collection both run their envs here. Two ways to use it:

* :meth:`EnvPool.run`: one batch of calls per step to every worker at once, answers collected (the
  rollout loop: env steps of different workers run in parallel while the policy batches its prompts).
* :meth:`EnvPool.imap`: a queue of independent calls (one whole expert episode each), one in flight
  per worker, results yielded as they finish; a call whose worker is lost is retried on a new worker
  up to ``max_restarts`` times, then reported as failed with the reason.

**No env call hangs the run.** With ``call_timeout`` set, a worker arms a real-time timer around every
env call (``setitimer``) with SIGALRM's default action, so the kernel ends the worker when a call runs
past its deadline, even inside C code or a JVM round trip that never returns (known ALFWorld and
ScienceWorld failures). The parent holds the same deadline per call, not per batch: a worker answers each
call as it finishes, and one whose next answer is more than ``call_timeout`` + :data:`GRACE_S` late (a
worker stopped with SIGSTOP, whose own timer cannot fire; a wedged pipe) is given up, whatever the number of
calls it was handed (its first answer after a start also allows for the start and one ``call_timeout`` for
building its envs, which runs under the same timer). A worker
that dies (deadline, killed, out of memory, a crashed JVM) is restarted with fresh envs; the slots it
held are reported with the reason by :meth:`EnvPool.pop_lost_slots` so the caller can replay their
episodes. :func:`~nemo_act.evaluation.env_worker.with_deadline` gives objects that make many env calls per
pool call (an expert player) the same per-call deadline.
"""

from __future__ import annotations

import collections
import multiprocessing as mp
import signal
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from multiprocessing.connection import wait
from typing import Any

from nemo_act.evaluation.env_worker import Command, build_envs, run_commands

GRACE_S = 5.0  # the parent waits this much past a call's deadline (the worker's own timer fires first)
START_S = 30.0  # and this much more for a new worker's first answer (interpreter start and imports: no timer yet)
CLOSE_S = 30.0  # a closing pool waits this long in all for its workers to close their envs, then kills the rest
ABORT_S = 2.0  # after Ctrl-C or an error, this long: a worker mid-call is killed (a py4j JVM exits with it)


def _worker(conn, factory: Callable[[], Any], n_envs: int, call_timeout: float | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent stops us
    envs, failure = build_envs(factory, n_envs, call_timeout)
    try:
        while True:
            msg = conn.recv()
            if msg is None:
                break
            for command in msg:  # one answer per call, as each finishes: the parent's deadline is per call
                conn.send(failure or run_commands(envs, [command])[0])
    finally:
        for env in envs:
            env.close()


class EnvPool:
    """Slots ``0 .. workers * envs_per_worker - 1``, each one env in a worker process.

    The pool's logic (batches per worker, deadlines, restarts, replays) is written against five transport
    methods (``_start``, ``_stop``, ``_send``, ``_poll``, ``_take``): here processes and pipes on this node,
    in :class:`RayEnvPool` Ray actors spread over a cluster's nodes.

    Args:
        factory: Picklable callable that builds one env (``reset(...)``, ``step(action)``, ``close()``).
        workers: Worker processes.
        envs_per_worker: Envs each worker holds.
        call_timeout: Deadline of one env call in seconds (``env.call_timeout_s``); None: none.
    """

    def __init__(
        self, factory: Callable[[], Any], workers: int, envs_per_worker: int, call_timeout: float | None = None
    ) -> None:
        self._factory = factory
        self.workers = workers
        self.envs_per_worker = envs_per_worker
        self.size = workers * envs_per_worker
        self.call_timeout = call_timeout
        self.restarts = 0
        self._lost: dict[int, str] = {}
        self._fresh: set[int] = set()  # workers that have not answered since they started (still building envs)
        self._setup()
        for w in range(workers):
            self._start(w)
            self._fresh.add(w)

    # ---- transport: worker processes on this node -------------------------------------------------
    def _setup(self) -> None:
        self._ctx = mp.get_context("spawn")
        self._conns: list[Any] = [None] * self.workers
        self._procs: list[Any] = [None] * self.workers

    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe()
        args = (child, self._factory, self.envs_per_worker, self.call_timeout)
        proc = self._ctx.Process(target=_worker, args=args, daemon=True)
        # started with SIGINT ignored, which the new interpreter keeps (an ignored signal stays ignored across exec,
        # and Python then installs no KeyboardInterrupt handler): a Ctrl-C that reaches the process group while the
        # worker still imports (seconds on a loaded machine) printed a traceback from it; its parent stops it. Only
        # the main thread may set a handler; the parent ignores Ctrl-C for the start alone (milliseconds).
        if threading.current_thread() is threading.main_thread():
            handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                proc.start()
            finally:
                signal.signal(signal.SIGINT, handler)
        else:
            proc.start()
        child.close()  # so a dead worker shows as EOF here
        self._conns[w], self._procs[w] = parent, proc

    def _stop(self, w: int) -> str:
        """End worker ``w`` (whatever state it is in) and say why it died, if it had."""
        proc = self._procs[w]
        proc.kill()
        proc.join(timeout=30)
        self._conns[w].close()
        code = proc.exitcode
        if code == -signal.SIGALRM:
            return "an env call ran past its deadline (env.call_timeout_s)"
        return f"env worker died (exit code {code})"

    def _send(self, w: int, msg: list[Command]) -> bool:
        """Hand worker ``w`` a batch of commands; False when it is gone."""
        try:
            self._conns[w].send(msg)
            return True
        except (BrokenPipeError, ConnectionResetError, OSError):
            return False

    def _poll(self, ws: list[int], timeout: float | None) -> set[int]:
        """The workers of ``ws`` with their next answer ready (or gone), waiting up to ``timeout`` for the first."""
        ready = wait([self._conns[w] for w in ws], timeout=timeout)
        return {w for w in ws if self._conns[w] in ready}

    def _take(self, w: int) -> Any:
        """Worker ``w``'s next answer, one call's ``(status, value)``; EOFError when it died."""
        try:
            return self._conns[w].recv()
        except (EOFError, ConnectionResetError, OSError):
            raise EOFError("lost") from None

    def _shutdown(self, wait_s: float) -> None:
        """Ask every worker to close its envs and end; kill those still there after ``wait_s`` seconds in all."""
        for conn in self._conns:
            try:
                conn.send(None)
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass
        deadline = time.monotonic() + wait_s
        for proc in self._procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()

    # ---- the pool ---------------------------------------------------------------------------------
    def _restart(self, w: int, reason: str | None = None) -> str:
        """Replace worker ``w``; its slots are lost with the reason (returned)."""
        died = self._stop(w)
        reason = reason or died
        self._start(w)
        self._fresh.add(w)
        self.restarts += 1
        for slot in range(w * self.envs_per_worker, (w + 1) * self.envs_per_worker):
            self._lost[slot] = reason
        return reason

    def _allowance(self, w: int) -> float | None:
        """How long the parent waits for worker ``w``'s next answer (None: for ever).

        One call's deadline plus :data:`GRACE_S`; for a worker that has not answered since it started, also
        its start (:data:`START_S`) and one more deadline for building its envs.
        """
        if not self.call_timeout:
            return None
        if w in self._fresh:
            return 2 * self.call_timeout + GRACE_S + START_S
        return self.call_timeout + GRACE_S

    def _late(self, w: int, waited: float) -> str:
        return f"no answer within {waited:.0f} s (env.call_timeout_s={self.call_timeout:g})"

    def run(self, calls: dict[int, tuple[str, tuple]]) -> dict[int, Any]:
        """Run ``{slot: (method, args)}`` on the envs, workers in parallel; return ``{slot: result}``.

        Slots of a worker that died or ran past a call's deadline are missing from the result; the worker
        is restarted and all its slots (also those not in ``calls``) are listed by :meth:`pop_lost_slots`.

        Raises:
            RuntimeError: An env raised; the message names the slot and the error.
        """
        per_worker: dict[int, list[int]] = {}
        for slot in calls:
            per_worker.setdefault(slot // self.envs_per_worker, []).append(slot)
        waiting: dict[int, tuple[collections.deque[int], float]] = {}  # worker -> (slots to answer, since)
        for w, slots in per_worker.items():
            msg = [(slot % self.envs_per_worker, *calls[slot]) for slot in slots]
            if self._send(w, msg):
                waiting[w] = (collections.deque(slots), time.monotonic())
            else:
                self._restart(w)
        out: dict[int, Any] = {}
        while waiting:
            now = time.monotonic()
            deadlines = {w: since + a for w, (_, since) in waiting.items() if (a := self._allowance(w)) is not None}
            timeout = max(0.0, min(deadlines.values()) - now) if deadlines else None
            ready = self._poll(list(waiting), timeout)
            now = time.monotonic()
            for w in list(waiting):
                slots, since = waiting[w]
                if w not in ready:
                    if w in deadlines and now >= deadlines[w]:
                        del waiting[w]
                        self._restart(w, self._late(w, now - since))
                    continue
                try:
                    status, value = self._take(w)
                except EOFError:
                    del waiting[w]
                    self._restart(w)
                    continue
                self._fresh.discard(w)
                slot = slots.popleft()
                if status != "ok":
                    raise RuntimeError(f"env slot {slot}: {value}")
                out[slot] = value
                if slots:
                    waiting[w] = (slots, now)
                else:
                    del waiting[w]
        return out

    def imap(
        self, calls: Iterable[tuple[Hashable, str, tuple]], max_restarts: int
    ) -> Iterator[tuple[Hashable, str, Any]]:
        """Run independent ``(key, method, args)`` calls, one per worker at a time; yield as they finish.

        Each worker uses its first env. Yields ``(key, "ok", result)``, ``(key, "error", message)`` when
        the env raised, or ``(key, "failed", reason)`` when the call's worker was lost more than
        ``max_restarts`` times (each loss restarts the worker and replays the call on it).
        """
        pending = collections.deque(calls)
        busy: dict[int, tuple[Hashable, str, tuple, float, float | None]] = {}  # w -> call, sent, deadline
        losses: dict[Hashable, int] = collections.Counter()
        idle = list(range(self.workers))
        while pending or busy:
            while idle and pending:
                w, (key, method, args) = idle.pop(), pending.popleft()
                allowance, sent = self._allowance(w), time.monotonic()
                busy[w] = (key, method, args, sent, None if allowance is None else sent + allowance)
                self._send(w, [(0, method, args)])  # a dead worker shows as lost below
            deadlines = [d for *_, d in busy.values() if d is not None]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            ready = self._poll(list(busy), timeout)
            for w in list(busy):
                key, method, args, sent, deadline = busy[w]
                late = deadline is not None and time.monotonic() >= deadline
                if w not in ready and not late:
                    continue
                del busy[w]
                idle.append(w)
                try:
                    if w not in ready:
                        self._restart(w, self._late(w, time.monotonic() - sent))
                        raise EOFError("timeout")
                    try:
                        status, value = self._take(w)
                    except EOFError:
                        self._restart(w)
                        raise
                    self._fresh.discard(w)
                except EOFError:
                    reason = self._lost.pop(w * self.envs_per_worker, "env worker lost")
                    self.pop_lost_slots()
                    losses[key] += 1
                    if losses[key] > max_restarts:
                        yield key, "failed", f"{reason}; gave up after {losses[key]} tries"
                    else:
                        pending.appendleft((key, method, args))
                    continue
                yield key, status, value

    def pop_lost_slots(self) -> dict[int, str]:
        """Slots whose env was lost since the last call, with the reason (their episodes must restart)."""
        lost, self._lost = self._lost, {}
        return lost

    def close(self, abort: bool = False) -> None:
        """Stop the workers (and their envs).

        Args:
            abort: Stop now (Ctrl-C or an error: a worker mid-episode is not waited for, :data:`ABORT_S`); else
                each gets to close its envs (:data:`CLOSE_S` in all).
        """
        self._shutdown(ABORT_S if abort else CLOSE_S)

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(abort=exc_type is not None)
