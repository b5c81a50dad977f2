"""Generation backends behind one protocol: hf (transformers), vllm (GPU nodes), random, gold.

A model policy runs in the caller's process (``generation.engines: 1``) or as an
:class:`~nemo_act.generation.ray_pool.EnginePool` of Ray actors over the cluster's GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nemo_act.config.schema import ExperimentConfig, GenerationConfig
from nemo_act.generation.base import GenerationRequest, Generator
from nemo_act.generation.simple import DataGenerator, GoldGenerator, MixedGenerator, RandomGenerator, wrap_action


@dataclass(frozen=True)
class BackendFactory:
    """Builds one engine's generator of the configured backend (picklable: it runs inside a Ray actor)."""

    policy: str
    cfg: ExperimentConfig

    def __call__(self) -> Generator:
        """The generator (vLLM or HF) for :attr:`policy`."""
        if self.cfg.generation.backend == "vllm":
            from nemo_act.generation.vllm import VLLMGenerator

            return VLLMGenerator(self.cfg.model, self.cfg.generation, name_or_path=self.policy)
        from nemo_act.generation.hf import HFGenerator

        return HFGenerator(self.cfg.model, self.cfg.generation, name_or_path=self.policy)


def engine_resources(gen: GenerationConfig) -> dict[str, float]:
    """What one engine actor reserves: its CPUs and, for vLLM, ``tensor_parallel`` GPUs (HF on CUDA: one)."""
    if gen.backend == "vllm":
        assert gen.vllm is not None
        gpus = gen.vllm.tensor_parallel
    else:
        gpus = 1 if gen.device.startswith("cuda") else 0
    return {"CPU": gen.engine_cpus, "GPU": float(gpus)}


def _gpus_per_engine(gen: GenerationConfig) -> int:
    """GPUs one engine holds, at least 1 for counting engines per GPU."""
    return int(engine_resources(gen)["GPU"]) or 1


def resolve_engines(gen: GenerationConfig) -> int:
    """``generation.engines`` as a number: ``auto`` counts the GPUs of the Ray cluster the step would use.

    With no Ray address configured (``generation.ray_address``, ``RAY_ADDRESS``) ``auto`` counts this
    machine's GPUs, so one GPU box runs in-process without Ray.
    """
    import os

    if gen.engines != "auto":
        return int(gen.engines)
    if gen.ray_address or os.environ.get("RAY_ADDRESS"):
        from nemo_act.generation.ray_pool import auto_engines, connect

        return auto_engines(connect(gen.ray_address, 0), _gpus_per_engine(gen))
    try:
        import torch

        return max(1, torch.cuda.device_count() // _gpus_per_engine(gen))
    except ImportError:
        return 1


def planned_engines(cfg: ExperimentConfig) -> int:
    """The engines a data step will get, without starting anything (plan, dry run).

    ``auto`` counts the GPUs the engine's job holds (:meth:`~nemo_act.engines.Engine.job_gpus`: the cluster
    engine's recipe, which the job's Ray cluster holds once every node joined); elsewhere as :func:`resolve_engines`.
    """
    from nemo_act.engines import engine_for

    gen = cfg.generation
    gpus = engine_for(cfg).job_gpus(cfg) if gen.engines == "auto" else None
    if gpus is not None:
        return max(1, gpus // _gpus_per_engine(gen))
    return resolve_engines(gen)


def seeded_per_request(gen: GenerationConfig) -> bool:
    """Whether the backend seeds each request from its own key (vLLM): a request samples the same in any batch.

    HF seeds each batch from its first request, so there the batches must stay where the single engine cuts them.
    """
    return gen.backend == "vllm"


def engines_summary(cfg: ExperimentConfig, engines: int | None = None) -> str:
    """What a data step's generation runs on, for plans: ``16 vllm engines x 1 GPU, ~12 s per 1,000 requests``.

    The time comes from ``generation.engine_rate`` (requests/s per engine) when it is set.

    Args:
        cfg: The run's config.
        engines: :func:`planned_engines`, when the caller has it already (None: counted here).
    """
    gen = cfg.generation
    n = planned_engines(cfg) if engines is None else engines
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


def make_generator(policy: str, cfg: ExperimentConfig, data: str | Path | None = None) -> Generator:
    """Build the generator for a policy name.

    Args:
        policy: ``random``, ``gold``, ``from_data`` (pair alternatives from ``data``'s expert actions), or an
            HF checkpoint (hub name or folder).
        cfg: The experiment config (model and generation settings).
        data: The expert trajectories being paired (``from_data`` only).

    Returns:
        A generator: in this process, or spread over ``generation.engines`` Ray actors.

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
        from nemo_act.data.io import read_jsonl
        from nemo_act.data.records import Trajectory

        actions = [s.action for t in read_jsonl(data, Trajectory) for s in t.steps]
        return DataGenerator(actions, cfg.prompt.max_candidate_chars)
    factory = BackendFactory(policy, cfg)
    engines = resolve_engines(cfg.generation)
    if engines == 1:
        return factory()
    from nemo_act.generation.ray_pool import EnginePool

    gen = cfg.generation
    split = "even" if seeded_per_request(gen) else "grid"
    return EnginePool(
        factory, engines, gen.batch_size, engine_resources(gen), gen.in_flight, split=split, address=gen.ray_address
    )


__all__ = [
    "BackendFactory",
    "GenerationRequest",
    "Generator",
    "GoldGenerator",
    "DataGenerator",
    "RandomGenerator",
    "engine_resources",
    "engines_summary",
    "seeded_per_request",
    "make_generator",
    "make_pairs_generator",
    "MixedGenerator",
    "planned_engines",
    "resolve_engines",
    "wrap_action",
]
