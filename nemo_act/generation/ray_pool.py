"""Generation on every engine of a Ray cluster (``generation.engines``): one backend copy per actor.

A data step (pairs, held-out selection, evaluation, the reflection baselines' data) that asks for more
than one engine gets an :class:`EnginePool`: ``engines`` Ray actors, each holding one generator of the
configured backend (a vLLM ``LLM`` on ``generation.vllm.tensor_parallel`` GPUs on a GPU node, the HF
generator on CPU in tests), each in a placement group of its own, all asked for before any engine starts,
so a step either gets all its engines or stops with the count it could not place. An engine over several
GPUs is placed as vLLM's Ray executor requires (:class:`EnginePlacement`,
:func:`~nemo_act.generation.engine_placement`); a pool is closed at the end of its step and its resources
waited for (:meth:`EnginePool.close`, :func:`close_pools` before a training stage).

* **Sharding that keeps the seeds.** vLLM seeds each request from its own key, so a call is cut into at
  least one piece per engine (none over ``generation.batch_size``): an env step's single call or an Early
  Experience chunk spreads over every engine. The HF backend seeds a batch from its first request, so
  there a call is cut into batches of ``batch_size`` exactly where the single engine cuts it. Either way
  the answers are merged in request order: the same requests with the same seeds whatever the engine
  count or which engine was free first (the HF and random backends then answer byte for byte as one
  engine does; vLLM's sampled tokens can still differ with batch make-up, see ``generation/vllm.py``).
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
import socket
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nemo_act.config.schema import SamplingConfig
from nemo_act.generation.base import GenerationRequest, Generator

# The variables by which Ray tells each worker its accelerators, one per kind, read off Ray 2.55.1 (the release
# NeMo-RL v0.7.0 asks for) and 2.60: each accelerator manager's get_visible_accelerator_ids_env_var
# (ray/_private/accelerators/__init__.py: get_all_accelerator_managers; nvidia_gpu.py: CUDA_VISIBLE_DEVICES,
# amd_gpu.py: HIP_VISIBLE_DEVICES, intel_gpu.py: ONEAPI_DEVICE_SELECTOR, ZE_AFFINITY_MASK from 2.60, tpu.py:
# TPU_VISIBLE_CHIPS, neuron.py, hpu.py, npu.py, rbln.py, furiosa.py, ...), and one that selects accelerators per
# process without being any manager's: ROCR_VISIBLE_DEVICES (AMD's before HIP_VISIBLE_DEVICES, which Ray's AMD manager
# refuses to see set alone). tests/test_ray_engines.py checks that every manager of the installed Ray names one.
RAY_ACCELERATOR_VARIABLES = (
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ONEAPI_DEVICE_SELECTOR", "ZE_AFFINITY_MASK",
    "TPU_VISIBLE_CHIPS", "NEURON_RT_VISIBLE_CORES", "HABANA_VISIBLE_MODULES", "ASCEND_RT_VISIBLE_DEVICES",
    "RBLN_DEVICES", "FURIOSA_DEVICES", "QBRUNTIME_VISIBLE_DEVICES", "TT_VISIBLE_DEVICES",
)  # fmt: skip


def accelerator_variables() -> frozenset[str]:
    """The per-process accelerator selection variables that Ray sets for each worker it places, and their kin.

    The list above, and whatever else a manager of the installed Ray names (a Ray that knows more kinds drops those
    too). A manager that fails to answer is passed over, never a crash: Ray 2.55.1's AMD manager raises RuntimeError
    when ``ROCR_VISIBLE_DEVICES`` is set without ``HIP_VISIBLE_DEVICES`` and ValueError when the HIP and CUDA lists
    differ (``ray/_private/accelerators/amd_gpu.py:42-58``), which Slurm's gres.conf or a site's modules may set on
    any node; Ray itself asks only the manager of the accelerators it detected.
    """
    names = set(RAY_ACCELERATOR_VARIABLES)
    try:
        from ray._private.accelerators import get_all_accelerator_managers

        managers = list(get_all_accelerator_managers())
    except (ImportError, AttributeError):
        managers = []
    for manager in managers:
        try:
            names.add(manager.get_visible_accelerator_ids_env_var())
        except Exception:  # noqa: BLE001, S112 - its variable is in the list; the driver must not depend on it
            continue
    return frozenset(n for n in names if n)


def actor_env() -> dict[str, str]:
    """The environment an actor gets: the driver's, less what Ray owns per process.

    As NeMo-RL's ``init_ray`` hands its workers (``nemo_rl/distributed/virtual_cluster.py:199-203``): all of
    ``os.environ``, so PYTHONPATH, the offline hub and data paths (``ALFWORLD_DATA``) reach actors on every node
    whatever the raylet was started with, but not the one variable that would stop Ray from setting each actor's
    ``CUDA_VISIBLE_DEVICES``, nor the driver's own accelerator selection (:func:`accelerator_variables`): Ray does
    not overwrite a ``CUDA_VISIBLE_DEVICES`` given in an actor's ``runtime_env`` (ray-project/ray#66400), so a
    driver started on a subset of a node's GPUs (an ``srun`` step, a shared node) would hand every engine actor the
    driver's GPU list instead of the GPU Ray placed it on, and vLLM an index out of range.
    """
    drop = accelerator_variables() | {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"}
    return {k: v for k, v in os.environ.items() if k not in drop}


PLACEMENT_TIMEOUT_S = 300.0
RELEASE_TIMEOUT_S = 120.0  # a closed pool's actors dead and its placement groups removed within this


class PlacementError(RuntimeError):
    """The Ray cluster cannot hold the engines a step asks for."""


class EngineError(RuntimeError):
    """A generation engine could not be built in its actor (the model, the backend).

    One line; the traceback is in the driver's log under the engine's label.
    """


@dataclass(frozen=True)
class EnginePlacement:
    """What one engine asks Ray for.

    A placement group of ``bundles`` (bundle 0 holds the engine's actor), what the actor itself takes, and the
    environment it gets on top of the driver's (:func:`actor_env`). An engine whose backend starts workers of its
    own (vLLM's Ray executor for tensor parallel > 1) gets one bundle per worker while its own actor holds no GPU;
    see :func:`~nemo_act.generation.engine_placement`.
    """

    bundles: tuple[Mapping[str, float], ...]
    actor: Mapping[str, float]
    env: Mapping[str, str] = field(default_factory=dict)
    env_per_engine: Mapping[str, str] = field(default_factory=dict)  # name -> value prefix, "_<engine index>" added

    @classmethod
    def plain(cls, resources: Mapping[str, float]) -> EnginePlacement:
        """One bundle, all of it the actor's (an engine that starts no workers: HF, vLLM on one GPU)."""
        return cls(bundles=(dict(resources),), actor=dict(resources))

    def total(self) -> dict[str, float]:
        """What one engine reserves, all bundles together."""
        out: dict[str, float] = {}
        for bundle in self.bundles:
            for k, v in bundle.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def env_for(self, index: int) -> dict[str, str]:
        """The extra environment of engine ``index``."""
        return {**self.env, **{k: f"{v}_{index}" for k, v in self.env_per_engine.items()}}


def combined_bundles(placements: Sequence[EnginePlacement]) -> tuple[dict[str, float], ...]:
    """The bundles of one placement group that holds an engine of each of ``placements``: bundle by bundle, the sum.

    Models sharing an engine's GPUs (each at its share of every GPU: :func:`~nemo_act.generation.engine_placement`)
    then get whole-GPU bundles, one GPU per tensor-parallel rank, and each model's worker ``i`` takes its share of
    bundle ``i``'s GPU, as NeMo-RL colocates its vLLM and training workers on shared bundles
    (``nemo_rl/distributed/virtual_cluster.py``: one placement group of whole GPUs, each worker a fraction of one).
    """
    out: list[dict[str, float]] = []
    for i in range(max(len(p.bundles) for p in placements)):
        bundle: dict[str, float] = {}
        for p in placements:
            for k, v in (p.bundles[i] if i < len(p.bundles) else {}).items():
                bundle[k] = round(bundle.get(k, 0.0) + v, 6)
        out.append(bundle)
    return tuple(out)


_LIVE: weakref.WeakSet[EnginePool] = weakref.WeakSet()  # this process's open pools


def live_pools() -> list[EnginePool]:
    """The engine pools of this process that hold resources now."""
    return [p for p in list(_LIVE) if p._actors]


def close_pools() -> int:
    """Close every open engine pool of this process and wait until its resources are back.

    Called before a training stage takes the GPUs. Returns how many were open.
    """
    pools = live_pools()
    for pool in pools:
        pool.close()
    return len(pools)


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
        if not sys.stdout.isatty():  # a log file (pipeline.log) gets Ray's actor prefixes without colour codes
            os.environ.setdefault("RAY_COLOR_PREFIX", "0")
        address = address or os.environ.get("RAY_ADDRESS")
        # actors' stdout and stderr reach the driver's (on a Slurm job: pipeline.log), each line prefixed with the
        # actor and its node (actor_label: "engine 3 on node-12") and pid; Ray folds lines that repeat
        # across actors but for their numbers ("[repeated 15x across cluster]", RAY_DEDUP_LOGS), so 16 engines'
        # start-up logs cost one engine's lines on the console
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(address="local", num_cpus=max(os.cpu_count() or 1, math.ceil(num_cpus)), **kwargs)
    return dict(ray.cluster_resources())


def place_groups(bundles: Sequence[Mapping[str, float]], engines: int, address: str | None) -> list[Any]:
    """One ``STRICT_PACK`` placement group of ``bundles`` per engine, all placed before anything starts in them.

    The capacity is checked first against the cluster less what this process's open pools hold, naming them: what
    they hold is not coming back while this step runs (a policy's pool beside its critic's), and asked for anyway,
    the groups would wait :data:`PLACEMENT_TIMEOUT_S`. Resources others are releasing (a pool or env actors just
    closed) are left to the groups' own wait.

    Raises:
        PlacementError: The cluster cannot hold them now, or they were not placed within the timeout.
    """
    import ray
    from ray.util.placement_group import placement_group

    per_engine: dict[str, float] = {}
    for bundle in bundles:
        for k, v in bundle.items():
            per_engine[k] = per_engine.get(k, 0.0) + v
    have = connect(address, engines * per_engine.get("CPU", 0))
    need = {k: v * engines for k, v in per_engine.items() if v}
    held: dict[str, float] = {}
    for pool in live_pools():
        for k, v in pool.placement.total().items():
            held[k] = held.get(k, 0.0) + v * pool.engines
    free = {k: have.get(k, 0) - held.get(k, 0) for k in need}
    short = {k: f"{need[k]:g} needed, {free[k]:g} free of {have.get(k, 0):g}" for k in need if need[k] > free[k]}
    if short:
        others = "; ".join(f"{p.name}: {p.engines} engines" for p in live_pools())
        raise PlacementError(
            f"generation.engines={engines}: the Ray cluster cannot hold them now ({short})"
            + (f"; this process's other engine pools hold part of it ({others})" if others else "")
        )
    pgs = [placement_group([dict(b) for b in bundles], strategy="STRICT_PACK") for _ in range(engines)]
    ready, _ = ray.wait([pg.ready() for pg in pgs], num_returns=engines, timeout=PLACEMENT_TIMEOUT_S)
    if len(ready) < engines:
        remove_groups(pgs)
        raise PlacementError(
            f"generation.engines={engines}: {engines} groups of {list(bundles)} could not be placed "
            f"within {PLACEMENT_TIMEOUT_S:g} s (other work holds the resources?)"
        )
    return pgs


def remove_groups(pgs: Sequence[Any]) -> None:
    """Remove placement groups and wait until their resources are back in the cluster's free pool.

    Ray reports a group ``REMOVED`` before its nodes have returned its bundles: the bundles' own resources
    (``bundle_group_<index>_<group id>``) stay listed until then, so those are what is waited for.
    """
    import ray
    from ray.util import remove_placement_group

    for pg in pgs:
        remove_placement_group(pg)
    ids = [pg.id.hex() for pg in pgs]
    deadline = time.monotonic() + RELEASE_TIMEOUT_S
    while ids and time.monotonic() < deadline:
        held = " ".join(ray.available_resources())
        ids = [i for i in ids if i in held]
        if ids:
            time.sleep(0.05)


def auto_engines(resources: dict[str, float], gpus_per_engine: int) -> int:
    """``generation.engines: auto``: one engine per ``gpus_per_engine`` GPUs of the cluster (at least one)."""
    return max(1, int(resources.get("GPU", 0)) // gpus_per_engine)


def actor_label(what: str) -> str:
    """An actor's name on the driver's log: ``engine 3 on node-12`` (Ray prints it before the pid, ``__repr__``)."""
    return f"{what} on {socket.gethostname()}"


class _Engine:
    """One generator in its own Ray actor process.

    Built in two calls, ``_Engine(what)`` then :meth:`build`, so that what the backend prints while it loads (vLLM's
    start-up, a traceback) already carries the actor's label: Ray prefixes a line with ``__repr__`` only once
    ``__init__`` has returned (before that, the class name).
    """

    def __init__(self, what: str) -> None:
        self.label = actor_label(what)

    def __repr__(self) -> str:
        return self.label

    def build(self, factory: Callable[[], Generator]) -> tuple[str, int]:
        try:
            self.generator = factory()
        except BaseException:
            traceback.print_exc()  # on the driver's log under this engine's label, beside what the backend printed
            raise
        self.name = self.generator.name
        return self.where()

    def generate(self, batch: list[GenerationRequest], n: int, sampling: SamplingConfig, seed: int) -> list[list[str]]:
        return self.generator.generate(batch, n, sampling, seed)

    def score(self, batch: list[tuple[GenerationRequest, str]]) -> list[float]:
        return self.generator.score([r for r, _ in batch], [c for _, c in batch])  # type: ignore[attr-defined]

    def where(self) -> tuple[str, int]:

        return socket.gethostname(), os.getpid()


class EnginePool:
    """``engines`` copies of a generator as Ray actors, behind the :class:`Generator` protocol.

    Each engine is a placement group of its own (``STRICT_PACK``: an engine's bundles on one node, as vLLM wants its
    tensor-parallel workers), all of them asked for before any actor starts, so a step gets every engine or stops
    with a :class:`PlacementError` (:func:`place_groups`), or groups shared with the other models of the step.
    :meth:`close` kills the actors, removes the groups it placed and waits until both are gone.

    Args:
        factory: Picklable callable that builds one engine's generator (run inside each actor).
        engines: How many engines.
        batch_size: Requests per batch (the single-engine backend's ``generation.batch_size``).
        placement: What one engine asks Ray for (:class:`EnginePlacement`); a plain mapping such as
            ``{"CPU": 1}`` is one bundle that the actor takes whole.
        in_flight: Calls queued per engine.
        split: ``grid`` (a backend seeded per batch: HF) or ``even`` (seeded per request: vLLM); see
            :meth:`_shards`.
        address: Ray address (see :func:`connect`).
        groups: Placement groups placed already, one per engine, shared with other pools (models sharing their
            GPUs: :func:`combined_bundles`); this pool's actors go into them and :meth:`close` leaves them to their
            owner. None: the pool places its own (:func:`place_groups`).
    """

    def __init__(
        self,
        factory: Callable[[], Generator],
        engines: int,
        batch_size: int,
        placement: EnginePlacement | Mapping[str, float],
        in_flight: int,
        split: Literal["grid", "even"] = "grid",
        address: str | None = None,
        groups: Sequence[Any] | None = None,
    ) -> None:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.batch_size, self.in_flight, self.engines, self.split = batch_size, in_flight, engines, split
        self.seeds_each_request = split == "even"  # its engines seed each request (vLLM)
        self._actors: list[Any] = []
        self._pgs: list[Any] = []
        if not isinstance(placement, EnginePlacement):
            placement = EnginePlacement.plain(placement)
        self.placement = placement
        self._own_groups = groups is None
        self._pgs = place_groups(placement.bundles, engines, address) if groups is None else list(groups)
        actor = ray.remote(_Engine)
        # capture_child_tasks: what the engine starts (vLLM's Ray workers) lands in its group, as NeMo-RL's
        # worker groups place theirs (nemo_rl/distributed/worker_groups.py:213-217)
        self._actors = [
            actor.options(
                num_cpus=placement.actor.get("CPU", 0),
                num_gpus=placement.actor.get("GPU", 0),
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True
                ),
                runtime_env={"py_executable": sys.executable, "env_vars": {**actor_env(), **placement.env_for(i)}},
            ).remote(f"engine {i}")
            for i, pg in enumerate(self._pgs)
        ]
        _LIVE.add(self)
        self.name = factory_name(factory)
        try:  # an engine that cannot be built printed its traceback on the driver's log under its label
            self.where = ray.get([a.build.remote(factory) for a in self._actors])
        except ray.exceptions.RayError as err:
            self.close()
            cause = getattr(err, "cause", None) or err
            last = (str(cause).strip().splitlines() or [""])[-1]
            raise EngineError(
                f"a generation engine of {self.name} could not be built: {type(cause).__name__}: {last} "
                "(its traceback: the engine's lines in the log)"
            ) from err
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
        """Stop the engines, free their placement groups and wait until both are gone.

        A training stage may need the GPUs next: a killed engine's process, and so its GPU memory, is gone when Ray
        reports the actor dead.
        """
        import ray

        actors, self._actors = self._actors, []
        for a in actors:
            ray.kill(a, no_restart=True)
        self._remove_groups()
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        for a in actors:  # a call on a killed actor fails once Ray has it dead
            while time.monotonic() < deadline:
                try:
                    ray.get(a.where.remote(), timeout=max(0.0, deadline - time.monotonic()))
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                    break
                time.sleep(0.05)
        _LIVE.discard(self)

    def _remove_groups(self) -> None:
        """Remove the pool's own placement groups (:func:`remove_groups`); shared ones are their owner's to remove."""
        pgs, self._pgs = self._pgs, []
        if self._own_groups:
            remove_groups(pgs)

    def __del__(self) -> None:
        try:
            if self._actors or self._pgs:
                self.close()
        except Exception:  # interpreter shutdown: Ray may be gone already
            pass


def factory_name(factory: Callable[[], Generator]) -> str:
    """The policy name a factory builds (its ``name`` attribute, else its repr)."""
    return str(getattr(factory, "policy", None) or getattr(factory, "name", None) or factory)


__all__ = [
    "EnginePlacement",
    "combined_bundles",
    "place_groups",
    "remove_groups",
    "EngineError",
    "EnginePool",
    "PlacementError",
    "accelerator_variables",
    "actor_env",
    "auto_engines",
    "close_pools",
    "connect",
    "live_pools",
]
