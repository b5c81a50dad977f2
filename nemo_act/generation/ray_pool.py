"""Generation on every engine of a Ray cluster (``generation.engines``): one backend copy per actor.

A data step (pairs, held-out selection, evaluation, the reflection baselines' data) that asks for more
than one engine gets an :class:`EnginePool`: ``engines`` Ray actors, each holding one generator of the
configured backend (a vLLM ``LLM`` on ``generation.vllm.tensor_parallel`` GPUs on a GPU node, the HF
generator on CPU in tests), reserved together in one placement group so a step either gets all its
engines or stops with the count it could not place.

* **Sharding that keeps the seeds.** vLLM seeds each request from its own key, so a call is cut into at
  least one piece per engine (none over ``generation.batch_size``): an env step's single call or an Early
  Experience chunk spreads over every engine. The HF backend seeds a batch from its first request, so
  there a call is cut into batches of ``batch_size`` exactly where the single engine cuts it. Either way
  the answers are merged in request order and equal the single-engine output for the same seeds,
  whatever the engine count or which engine was free first.
* **Many calls in flight.** :meth:`EnginePool.generate_batches` takes a stream of batches (``nemo-act
  pairs`` appends one grid batch at a time), keeps ``generation.in_flight`` pieces queued per engine and
  yields each batch's answers in order: a killed step loses only the batches in flight.
* **Whose resources.** Actors run the driver's interpreter (``runtime_env.py_executable``, as NeMo-RL's
  ``RayWorkerGroup`` gives each worker its venv's python: ``nemo_rl/distributed/worker_groups.py:493,566``)
  with the driver's environment (:func:`actor_env`); on a Slurm job the driver attaches to the job's
  cluster (``RAY_ADDRESS``, exported by the job's driver, or ``generation.ray_address``; NeMo-RL's
  ``init_ray`` attaches the same way, ``nemo_rl/distributed/virtual_cluster.py:212-218``); with neither it
  starts a local cluster of its own.

Why plain actors rather than Ray Data's LLM processor or NeMo-RL's ``VllmGeneration``: the env-bound
steps call the policy once per env step across all live episodes and need the answers back in the same
process at once (a blocking, ordered map), and every step keeps its own resumable files; Ray Data
streams a dataset to an output sink and owns the batching, and ``VllmGeneration`` ties the core to
NeMo-RL's ``RayVirtualCluster``/``BatchedDataDict`` and its worker venvs, which the local engine does not
have. Both are built on the same pieces used here (actors in a placement group, one engine per bundle).
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

from nemo_act.config.schema import SamplingConfig
from nemo_act.generation.base import GenerationRequest, Generator


def actor_env() -> dict[str, str]:
    """The environment an actor gets: the driver's.

    As NeMo-RL's ``init_ray`` hands its workers (``nemo_rl/distributed/virtual_cluster.py:199-203``): all of
    ``os.environ`` but the one variable that would stop Ray from setting each actor's ``CUDA_VISIBLE_DEVICES``,
    so PYTHONPATH, the offline hub and data paths (``ALFWORLD_DATA``) reach actors on every node whatever the
    raylet was started with.
    """
    env = dict(os.environ)
    env.pop("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES", None)
    return env


PLACEMENT_TIMEOUT_S = 300.0


class PlacementError(RuntimeError):
    """The Ray cluster cannot hold the engines a step asks for."""


def connect(address: str | None, num_cpus: float) -> dict[str, float]:
    """Attach to the job's Ray cluster (or start a local one) and return its resources.

    Args:
        address: ``generation.ray_address``; None: ``RAY_ADDRESS`` from the environment (the Slurm job's
            driver exports the head's), else a new local cluster of this process (``address="local"``:
            never a cluster some other program left running on the node).
        num_cpus: Logical CPUs of a local cluster this call starts (engines x ``engine_cpus`` at least).
    """
    import ray

    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(address="local", num_cpus=max(os.cpu_count() or 1, math.ceil(num_cpus)), **kwargs)
    return dict(ray.cluster_resources())


def auto_engines(resources: dict[str, float], gpus_per_engine: int) -> int:
    """``generation.engines: auto``: one engine per ``gpus_per_engine`` GPUs of the cluster (at least one)."""
    return max(1, int(resources.get("GPU", 0)) // gpus_per_engine)


class _Engine:
    """One generator in its own Ray actor process."""

    def __init__(self, factory: Callable[[], Generator]) -> None:
        self.generator = factory()
        self.name = self.generator.name

    def generate(self, batch: list[GenerationRequest], n: int, sampling: SamplingConfig, seed: int) -> list[list[str]]:
        return self.generator.generate(batch, n, sampling, seed)

    def score(self, batch: list[tuple[GenerationRequest, str]]) -> list[float]:
        return self.generator.score([r for r, _ in batch], [c for _, c in batch])  # type: ignore[attr-defined]

    def where(self) -> tuple[str, int]:
        import socket

        return socket.gethostname(), os.getpid()


class EnginePool:
    """``engines`` copies of a generator as Ray actors, behind the :class:`Generator` protocol.

    Args:
        factory: Picklable callable that builds one engine's generator (run inside each actor).
        engines: How many engines.
        batch_size: Requests per batch (the single-engine backend's ``generation.batch_size``).
        resources: Resources of one engine, e.g. ``{"CPU": 1, "GPU": 1}``.
        in_flight: Calls queued per engine.
        split: ``grid`` (a backend seeded per batch: HF) or ``even`` (seeded per request: vLLM); see
            :meth:`_shards`.
        address: Ray address (see :func:`connect`).
    """

    def __init__(
        self,
        factory: Callable[[], Generator],
        engines: int,
        batch_size: int,
        resources: dict[str, float],
        in_flight: int,
        split: Literal["grid", "even"] = "grid",
        address: str | None = None,
    ) -> None:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.batch_size, self.in_flight, self.engines, self.split = batch_size, in_flight, engines, split
        have = connect(address, engines * resources.get("CPU", 0))
        need = {k: v * engines for k, v in resources.items()}
        short = {k: f"{need[k]:g} needed, {have.get(k, 0):g} in the cluster" for k in need if need[k] > have.get(k, 0)}
        if short:
            raise PlacementError(f"generation.engines={engines}: the Ray cluster is too small ({short})")
        self._pg = placement_group([dict(resources) for _ in range(engines)], strategy="PACK")
        ready, _ = ray.wait([self._pg.ready()], timeout=PLACEMENT_TIMEOUT_S)
        if not ready:
            ray.util.remove_placement_group(self._pg)
            raise PlacementError(
                f"generation.engines={engines}: {engines} bundles of {resources} could not be placed within "
                f"{PLACEMENT_TIMEOUT_S:g} s (other work holds the resources?)"
            )
        runtime_env = {"py_executable": sys.executable, "env_vars": actor_env()}
        actor = ray.remote(_Engine)
        self._actors = [
            actor.options(
                num_cpus=resources.get("CPU", 0),
                num_gpus=resources.get("GPU", 0),
                scheduling_strategy=PlacementGroupSchedulingStrategy(self._pg, placement_group_bundle_index=i),
                runtime_env=runtime_env,
            ).remote(factory)
            for i in range(engines)
        ]
        self.name = factory_name(factory)
        self.where = ray.get([a.where.remote() for a in self._actors])
        self.batches = [0] * engines  # calls each engine answered
        self.items = [0] * engines
        self._load = [0] * engines  # pieces queued on each engine, by every call in flight
        self._lock = threading.Lock()  # calls may come from several threads (the rollout's lanes)
        self._turn = 0  # the engine a tie goes to next: small calls (an env step of a few episodes) reach every engine

    def _shards(self, items: Sequence[Any]) -> list[Sequence[Any]]:
        """``items`` cut into the pieces engines answer.

        ``grid``: batches of ``batch_size`` where the single-engine backend cuts them (its seeds are per batch,
        so the same pieces give the same samples). ``even``: for a backend that seeds each request (vLLM),
        at least one piece per engine, none over ``batch_size``, so a small call (an env step, an Early
        Experience chunk) still spreads over every engine.
        """
        if self.split == "grid":
            return [items[i : i + self.batch_size] for i in range(0, len(items), self.batch_size)]
        n = min(len(items), max(self.engines, math.ceil(len(items) / self.batch_size)))
        bounds = [round(i * len(items) / n) for i in range(n + 1)] if n else [0]
        return [items[bounds[i] : bounds[i + 1]] for i in range(n)]

    def _run(self, method: str, batches: Iterable[Sequence[Any]], extra: tuple) -> Iterator[list[Any]]:
        """Yield ``method(batch, *extra)`` of every batch, in order, its shards spread over the engines."""
        import ray

        source = iter(batches)
        queued: dict[Any, tuple[int, int, int]] = {}  # ref -> (batch index, shard index, engine)
        parts: dict[int, list[Any]] = {}  # batch index -> its shards' answers (None until in)
        next_in, next_out, exhausted = 0, 0, False
        while True:
            while not exhausted and len(queued) < self.engines * self.in_flight:
                batch = next(source, None)
                if batch is None:
                    exhausted = True
                    break
                shards = self._shards(batch)
                parts[next_in] = [None] * len(shards)
                for j, shard in enumerate(shards):
                    with self._lock:  # the least loaded engine (other threads' calls counted), taking turns on ties
                        e = min(range(self.engines), key=lambda i: (self._load[i], (i - self._turn) % self.engines))
                        self._load[e], self._turn = self._load[e] + 1, (e + 1) % self.engines
                        self.items[e] += len(shard)
                    queued[getattr(self._actors[e], method).remote(list(shard), *extra)] = (next_in, j, e)
                next_in += 1
            if next_out in parts and all(p is not None for p in parts[next_out]):
                yield [r for part in parts.pop(next_out) for r in part]
                next_out += 1
                continue
            if not queued:
                break
            ready, _ = ray.wait(list(queued), num_returns=1)
            for ref in ready:
                index, j, e = queued.pop(ref)
                with self._lock:
                    self._load[e] -= 1
                    self.batches[e] += 1
                parts[index][j] = ray.get(ref)

    concurrent_calls = True  # threads may call it at once (their pieces share the engines by load)

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int
    ) -> list[list[str]]:
        """Sample ``n`` responses per request (see :class:`~nemo_act.generation.base.Generator`)."""
        return next(self._run("generate", [requests], (n, sampling, seed))) if requests else []

    def generate_batches(
        self, batches: Iterable[Sequence[GenerationRequest]], n: int, sampling: SamplingConfig, seed: int
    ) -> Iterator[list[list[str]]]:
        """Answers of each batch, in order (a caller's resumable unit), its shards on several engines."""
        return self._run("generate", batches, (n, sampling, seed))

    def score(self, requests: Sequence[GenerationRequest], continuations: Sequence[str]) -> list[float]:
        """Log-likelihood of each continuation after its prompt (forced choice), on every engine."""
        pairs = list(zip(requests, continuations, strict=True))
        return next(self._run("score", [pairs], ())) if pairs else []

    def stats(self) -> dict[str, Any]:
        """Engines, where they ran, and the work each got."""
        return {"engines": self.engines, "where": self.where, "batches": self.batches, "items": self.items}

    def close(self) -> None:
        """Stop the engines and free their resources (a training stage may need the GPUs next)."""
        import ray

        for a in self._actors:
            ray.kill(a)
        ray.util.remove_placement_group(self._pg)
        self._actors = []

    def __del__(self) -> None:
        try:
            if self._actors:
                self.close()
        except Exception:  # interpreter shutdown: Ray may be gone already
            pass


def factory_name(factory: Callable[[], Generator]) -> str:
    """The policy name a factory builds (its ``name`` attribute, else its repr)."""
    return str(getattr(factory, "policy", None) or getattr(factory, "name", None) or factory)


__all__ = ["EnginePool", "PlacementError", "actor_env", "auto_engines", "connect"]
