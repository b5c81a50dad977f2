"""Generation backends behind one protocol: hf (transformers), vllm (GPU nodes), random, gold.

A model policy runs in the caller's process (``generation.engines: 1``) or as an
:class:`~nemo_act.generation.ray_pool.EnginePool` of Ray actors over the cluster's GPUs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nemo_act.config.schema import ExperimentConfig, GenerationConfig
from nemo_act.data.io import read_jsonl
from nemo_act.data.records import Trajectory
from nemo_act.generation import vllm as vllm_backend
from nemo_act.generation.base import GenerationRequest, Generator, close_generator
from nemo_act.generation.hf import HFGenerator
from nemo_act.generation.ray_pool import (
    EnginePlacement,
    EnginePool,
    auto_engines,
    combined_bundles,
    connect,
    place_groups,
    remove_groups,
)
from nemo_act.generation.simple import (
    NOT_MODELS,
    DataGenerator,
    GoldGenerator,
    MixedGenerator,
    RandomGenerator,
    wrap_action,
)
from nemo_act.generation.vllm import BATCH_INVARIANT, job_batch_invariant

if TYPE_CHECKING:
    from nemo_act.generation.ray_pool import EnginePlacement


@dataclass(frozen=True)
class BackendFactory:
    """Builds one engine's generator of the configured backend (picklable: it runs inside a Ray actor)."""

    policy: str
    cfg: ExperimentConfig

    def __call__(self) -> Generator:
        """The generator (vLLM or HF) for :attr:`policy`."""
        if self.cfg.generation.backend == "vllm":
            return vllm_backend.VLLMGenerator(self.cfg.model, self.cfg.generation, name_or_path=self.policy)

        return HFGenerator(self.cfg.model, self.cfg.generation, name_or_path=self.policy)


def engine_resources(gen: GenerationConfig) -> dict[str, float]:
    """What one engine actor reserves: its CPUs and, for vLLM, ``tensor_parallel`` GPUs (HF on CUDA: one)."""
    if gen.backend == "vllm":
        assert gen.vllm is not None
        gpus = gen.vllm.tensor_parallel
    else:
        gpus = 1 if gen.device.startswith("cuda") else 0
    return {"CPU": gen.engine_cpus, "GPU": float(gpus)}


def engine_placement(gen: GenerationConfig, share: int = 1) -> EnginePlacement:
    """What one engine of an :class:`~nemo_act.generation.ray_pool.EnginePool` asks Ray for.

    ``share``: how many models of the step share each GPU (:func:`open_generators`); each engine then asks for that
    fraction of every GPU it takes, so Ray places the models' engines on the same GPUs (vLLM accepts a bundle of
    under one GPU: its rule refuses only more than one).

    vLLM over several GPUs (``generation.vllm.tensor_parallel`` > 1) runs its tensor-parallel workers as Ray actors
    of its own (its ``ray`` executor), and vLLM refuses a placement group with a bundle of more than one GPU
    (vLLM 0.20.0 ``vllm/v1/executor/ray_utils.py:603-612``, ``initialize_ray_cluster``: "Placement group bundle
    cannot have more than 1 GPU"). So such an engine is placed the way NeMo-RL's vLLM worker is
    (``nemo_rl/models/generation/vllm/vllm_worker.py:139-147,277-293``, v0.7.0): one bundle of one GPU per worker,
    the engine's own actor on the first with no GPU of its own (``num_gpus=0``, Ray leaves its
    ``CUDA_VISIBLE_DEVICES`` alone), ``VLLM_RAY_BUNDLE_INDICES`` naming the bundles (read by vLLM's
    ``ray_executor.py:177-188``). One GPU or HF: one bundle, the actor's.

    Every vLLM engine gets NeMo-RL's two settings of its workers: ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (the engine
    core in the actor's process, ``vllm_worker.py:156``) and a ``VLLM_CACHE_ROOT`` of its own (``vllm_worker.py:
    115-119``: vLLM issue 18851, engines sharing a compile cache), and ``VLLM_BATCH_INVARIANT`` as
    ``generation.vllm.batch_invariant`` says (``1`` or ``0``, over whatever the job's environment holds): the
    setting reaches these actors, and the vLLM workers they start, only.
    """
    resources = engine_resources(gen)
    resources["GPU"] /= share
    if gen.backend != "vllm":
        return EnginePlacement.plain(resources)
    assert gen.vllm is not None
    cache = os.environ.get("VLLM_CACHE_ROOT", os.path.expanduser("~/.cache/vllm"))
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", BATCH_INVARIANT: "1" if gen.vllm.batch_invariant else "0"}
    tp = gen.vllm.tensor_parallel
    if tp <= 1:
        return EnginePlacement((resources,), resources, env, {"VLLM_CACHE_ROOT": cache})
    bundles = ({"CPU": resources["CPU"], "GPU": 1.0 / share},) + tuple({"GPU": 1.0 / share} for _ in range(tp - 1))
    env["VLLM_RAY_BUNDLE_INDICES"] = ",".join(map(str, range(tp)))
    if share > 1:  # each worker asks for VLLM_RAY_PER_WORKER_GPUS (default 1) on its bundle: ray_executor.py:152,210
        env["VLLM_RAY_PER_WORKER_GPUS"] = repr(1.0 / share)
    env["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
    return EnginePlacement(bundles, {"CPU": resources["CPU"], "GPU": 0.0}, env, {"VLLM_CACHE_ROOT": cache})


def _gpus_per_engine(gen: GenerationConfig) -> int:
    """GPUs one engine holds, at least 1 for counting engines per GPU."""
    return int(engine_resources(gen)["GPU"]) or 1


def resolve_engines(gen: GenerationConfig) -> int:
    """``generation.engines`` as a number: ``auto`` counts the GPUs of the Ray cluster the step would use.

    With no Ray address configured (``generation.ray_address``, ``RAY_ADDRESS``) ``auto`` counts this
    machine's GPUs, so one GPU box runs in-process without Ray.
    """
    if gen.engines != "auto":
        return int(gen.engines)
    if gen.ray_address or os.environ.get("RAY_ADDRESS"):
        return auto_engines(connect(gen.ray_address, 0), _gpus_per_engine(gen))
    try:
        import torch

        return max(1, torch.cuda.device_count() // _gpus_per_engine(gen))
    except ImportError:
        return 1


def planned_engines(cfg: ExperimentConfig, job_gpus: int | None) -> int:
    """The engines a data step will get, without starting anything (plan, dry run).

    Args:
        cfg: The run's config.
        job_gpus: The GPUs the job holds for generation (:meth:`~nemo_act.engines.Engine.job_gpus`: the cluster
            engine's recipe, which the job's Ray cluster holds once every node joined); None: counted here. Only
            ``generation.engines=auto`` reads it; otherwise as :func:`resolve_engines`.
    """
    gen = cfg.generation
    if gen.engines == "auto" and job_gpus is not None:
        return max(1, job_gpus // _gpus_per_engine(gen))
    return resolve_engines(gen)


def seeded_per_request(gen: GenerationConfig) -> bool:
    """Whether the backend seeds each request from its own key (vLLM): a request samples the same in any batch.

    HF seeds each batch from its first request, so there the batches must stay where the single engine cuts them.
    """
    return gen.backend == "vllm"


def engines_summary(cfg: ExperimentConfig, engines: int) -> str:
    """What a data step's generation runs on, for plans: ``16 vllm engines x 1 GPU, ~12 s per 1,000 requests``.

    The time comes from ``generation.engine_rate`` (requests/s per engine) when it is set.

    Args:
        cfg: The run's config.
        engines: :func:`planned_engines`.
    """
    gen = cfg.generation
    n = engines
    gpus = engine_resources(gen)["GPU"]
    where = f"{gpus:g} GPU" if gpus else "CPU"
    rate = f", ~{1000 / (n * gen.engine_rate):.0f} s per 1,000 requests" if gen.engine_rate else ""
    return f"{n} {gen.backend} engine{'s' * (n > 1)} x {where}{rate}"


def make_pairs_generator(policy: str, cfg: ExperimentConfig, experts: str | Path) -> Generator:
    """The generator that samples ACT pair alternatives for ``experts``.

    ``policy``'s (:func:`make_generator`), followed per state by ``pairs.from_data_k`` draws from the file's own
    expert actions when that is set (:class:`~nemo_act.generation.simple.MixedGenerator`).
    """
    gen = make_generator(policy, cfg, experts)
    if cfg.pairs.from_data_k and policy != "from_data":
        data = make_generator("from_data", cfg, experts)
        assert isinstance(data, DataGenerator)
        return MixedGenerator(gen, data, cfg.pairs.from_data_k)
    return gen


def make_generator(
    policy: str,
    cfg: ExperimentConfig,
    data: str | Path | None = None,
    engines: int | None = None,
    pooled: bool | None = None,
    share: int = 1,
    groups: Sequence[Any] | None = None,
) -> Generator:
    """Build the generator for a policy name.

    Args:
        policy: ``random``, ``gold``, ``from_data`` (pair alternatives from ``data``'s expert actions), or an
            HF checkpoint (hub name or folder).
        cfg: The experiment config (model and generation settings).
        data: The expert trajectories being paired (``from_data`` only).
        engines: The engines this policy gets (None: :func:`resolve_engines`; :func:`open_generators` hands each of
            several models its share).
        pooled: Run in Ray actors even with one engine (None: with more than one): a model's share of a step
            whose engines are Ray's must not take a GPU in this process behind Ray's back.
        share: Models that share this policy's GPUs (:func:`open_generators`): each vLLM engine takes that
            fraction of ``generation.vllm.gpu_memory_utilization`` (:func:`memory_share`) and of each GPU in Ray.
        groups: Placement groups shared with those models, one per engine (:func:`open_generators`); None: a pool
            places its own.

    Returns:
        A generator: in this process, or spread over that many Ray actors. Close it (:func:`close_generator`)
        when the step is done: a pool holds its GPUs until then.

    Raises:
        ValueError: ``from_data`` without ``data`` (it draws pair alternatives; it cannot play or reason).
    """
    if policy == "random":
        return RandomGenerator()
    if policy == "gold":
        return GoldGenerator()
    if policy == "from_data":
        if data is None:
            raise ValueError("policy from_data draws ACT pair alternatives from the experts file; use it for pairs")

        actions = [s.action for t in read_jsonl(data, Trajectory) for s in t.steps]
        return DataGenerator(actions, cfg.prompt.max_candidate_chars)
    factory = BackendFactory(policy, memory_share(cfg, share))
    engines = resolve_engines(cfg.generation) if engines is None else engines
    if cfg.generation.backend == "vllm":
        job_batch_invariant(os.environ)  # a value vLLM cannot read stops here, in one line, not in every engine
    if not (engines > 1 if pooled is None else pooled) and not needs_actor(cfg.generation):
        return factory()

    gen = cfg.generation
    split = "even" if seeded_per_request(gen) else "grid"
    return EnginePool(
        factory, engines, gen.batch_size, engine_placement(gen, share), gen.in_flight, split=split,
        address=gen.ray_address, groups=groups,
    )  # fmt: skip


def memory_share(cfg: ExperimentConfig, share: int) -> ExperimentConfig:
    """``cfg`` for one of ``share`` vLLM models on the same GPUs: ``gpu_memory_utilization`` divided among them.

    vLLM's ``gpu_memory_utilization`` is a fraction of the whole GPU per engine ("if you have two vLLM instances
    running on the same GPU, you can set the GPU memory utilization to 0.5 for each instance": vLLM 0.20.0
    ``vllm/config/cache.py:66-73``), and an engine refuses to start unless that much is free
    (``vllm/v1/worker/utils.py:403-420``, ``request_memory``, called at start in ``gpu_worker.py:283``): two models
    at 0.85 each on one GPU stop the second. Chosen over refusing the step: a one-GPU user can run SAND, Agent-R
    and a critic's reflection as they are, each model with u/m of the GPU (weights and KV cache must fit that share;
    the engine says so at start when they do not). The HF backend allocates as it goes: unchanged.
    """
    gen = cfg.generation
    if share <= 1 or gen.backend != "vllm" or gen.vllm is None:
        return cfg
    vllm = gen.vllm.model_copy(update={"gpu_memory_utilization": gen.vllm.gpu_memory_utilization / share})
    return cfg.model_copy(update={"generation": gen.model_copy(update={"vllm": vllm})})


def needs_actor(gen: GenerationConfig) -> bool:
    """Whether even one engine runs in a Ray actor.

    Batch invariance is set in the engine's environment only (:func:`engine_placement`), never in the step's own
    process, whose environment an in-process engine would read.
    """
    return gen.backend == "vllm" and gen.vllm is not None and gen.vllm.batch_invariant


def engine_shares(engines: int, models: int) -> list[int]:
    """A step's engines dealt to the ``models`` it runs at once (policy and critic): as even as they go.

    With one engine every model runs in the step's own process, as with one model.

    Raises:
        ValueError: More models than engines (each needs one of its own).
    """
    if engines == 1 or models <= 1:
        return [engines] * models
    if engines < models:
        raise ValueError(
            f"generation.engines={engines}: this step runs {models} models at once (a policy and its critic), "
            "each on engines of its own: give it at least that many, or 1 to run both in this process"
        )
    return [engines // models + (i < engines % models) for i in range(models)]


@contextmanager
def open_generators(cfg: ExperimentConfig, *policies: str, data: str | Path | None = None) -> Iterator[list[Generator]]:
    """Generators for ``policies`` (one per distinct name, the same object for a repeated name), closed on exit.

    A step that runs two models at once (SAND and Agent-R: the current policy samples, the frozen initial one
    critiques) splits the step's engines between them (:func:`engine_shares`): two pools that each asked for every
    GPU would leave the second waiting for the first's GPUs. With one engine both models share its GPUs, each with
    its share of the memory (:func:`memory_share`); where those engines run in Ray (batch invariance), they share
    one placement group of whole GPUs (:func:`~nemo_act.generation.ray_pool.combined_bundles`), so each
    tensor-parallel rank of each model gets a GPU of its own (in groups of their own, Ray placed two ranks' half-GPU
    bundles on one GPU and vLLM gave both workers ``CUDA_VISIBLE_DEVICES=0,0``). Every pool opened here is closed,
    and its resources waited for, when the block ends, so the next step or a training stage finds the GPUs free.
    """
    models = list(dict.fromkeys(p for p in policies if p not in NOT_MODELS))
    engines = resolve_engines(cfg.generation)
    shares = dict(zip(models, engine_shares(engines, len(models)), strict=True))
    share = len(models) if engines == 1 and len(models) > 1 else 1
    with ExitStack() as stack:
        groups = None
        if share > 1 and needs_actor(cfg.generation):  # the models' engines in Ray, on the same GPUs
            placement = engine_placement(cfg.generation, share)
            groups = place_groups(combined_bundles([placement] * share), 1, cfg.generation.ray_address)
            stack.callback(remove_groups, groups)  # after every pool in them is closed (callbacks run last first)
        made: dict[str, Generator] = {}
        for policy in dict.fromkeys(policies):
            made[policy] = make_generator(
                policy, cfg, data, engines=shares.get(policy), pooled=engines > 1, share=share,
                groups=groups if policy in models else None,
            )  # fmt: skip
            stack.callback(close_generator, made[policy])
        yield [made[p] for p in policies]


@contextmanager
def held(generator: Generator) -> Iterator[Generator]:
    """``generator`` for a with-block, closed when it ends (:func:`close_generator`)."""
    try:
        yield generator
    finally:
        close_generator(generator)


__all__ = [
    "BackendFactory",
    "GenerationRequest",
    "Generator",
    "GoldGenerator",
    "DataGenerator",
    "RandomGenerator",
    "close_generator",
    "engine_placement",
    "engine_resources",
    "engine_shares",
    "memory_share",
    "needs_actor",
    "held",
    "open_generators",
    "engines_summary",
    "seeded_per_request",
    "make_generator",
    "make_pairs_generator",
    "MixedGenerator",
    "planned_engines",
    "resolve_engines",
    "wrap_action",
]
