"""What runs inside an env worker: its envs built and called under a per-call deadline.

An env worker is a process of :class:`~nemo_act.evaluation.pool.EnvPool` or a Ray actor of
:class:`~nemo_act.evaluation.ray_env_pool.RayEnvPool`.

A worker arms a real-time timer around every env call (``setitimer``) with SIGALRM's default action, so the kernel
ends the worker when a call runs past its deadline, even inside C code or a JVM round trip that never returns.
Both pools' workers use these functions; neither pool module imports the other's.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

Command = tuple[int, str, tuple]  # (local env index, "reset" | "step" | any env method, args)


def arm(seconds: float | None) -> None:
    """Start this process's deadline timer (SIGALRM after ``seconds``; None or 0: none)."""
    if seconds:
        signal.setitimer(signal.ITIMER_REAL, seconds)


def disarm(seconds: float | None) -> None:
    """Stop the deadline timer armed with the same ``seconds``."""
    if seconds:
        signal.setitimer(signal.ITIMER_REAL, 0)


class _Deadline:
    """Proxy that runs every method call of ``target`` under the process's SIGALRM deadline."""

    def __init__(self, target: Any, seconds: float | None) -> None:
        self._target, self._seconds = target, seconds

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value) or not self._seconds:
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            arm(self._seconds)
            try:
                return value(*args, **kwargs)
            finally:
                disarm(self._seconds)

        return timed


def with_deadline(target: Any, seconds: float | None) -> Any:
    """``target`` with a deadline on each method call (in a pool worker: past it, the worker ends).

    Args:
        target: An env object.
        seconds: The deadline per call; None or 0: none.
    """
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # default action: the kernel ends the process
    return _Deadline(target, seconds)


def build_envs(
    factory: Callable[[], Any], n_envs: int, call_timeout: float | None
) -> tuple[list[Any], tuple[str, str] | None]:
    """A worker's envs, each call on them under the deadline; building them has the same deadline (a JVM start).

    Returns:
        The envs, and None; or no envs and the ``("error", message)`` every call of the worker is answered with
        when an env cannot be built (a missing package or file: the step fails naming it, instead of the worker
        dying and being restarted until every episode counts as lost).
    """
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    arm(call_timeout)
    try:
        return [with_deadline(factory(), call_timeout) for _ in range(n_envs)], None
    except Exception as err:
        return [], ("error", f"building the env failed: {type(err).__name__}: {err}")
    finally:
        disarm(call_timeout)


def run_commands(envs: list[Any], msg: list[Command]) -> list[tuple[str, Any]]:
    """Run a batch of commands on a worker's envs; an env's exception is reported, not raised."""
    results = []
    for local, method, args in msg:
        try:
            results.append(("ok", getattr(envs[local], method)(*args)))
        except Exception as err:  # reported to the parent, which names the episode
            results.append(("error", f"{type(err).__name__}: {err}"))
    return results
