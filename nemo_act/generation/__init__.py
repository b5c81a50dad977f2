"""Generation backends behind one protocol: hf (transformers), vllm (GPU nodes), random, gold.

A model policy runs in the caller's process (``generation.engines: 1``) or as an
:class:`~nemo_act.generation.ray_pool.EnginePool` of Ray actors over the cluster's GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from nemo_act.config.schema import ExperimentConfig, GenerationConfig
from nemo_act.generation.base import GenerationRequest, Generator
from nemo_act.generation.simple import GoldGenerator, RandomGenerator, wrap_action


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


def resolve_engines(gen: GenerationConfig) -> int:
    """``generation.engines`` as a number: ``auto`` counts the GPUs of the Ray cluster the step would use.

    With no Ray address configured (``generation.ray_address``, ``RAY_ADDRESS``) ``auto`` counts this
    machine's GPUs, so one GPU box runs in-process without Ray.
    """
    import os

    if gen.engines != "auto":
        return int(gen.engines)
    per_engine = int(engine_resources(gen)["GPU"]) or 1
    if gen.ray_address or os.environ.get("RAY_ADDRESS"):
        from nemo_act.generation.ray_pool import auto_engines, connect

        return auto_engines(connect(gen.ray_address, 0), per_engine)
    try:
        import torch

        return max(1, torch.cuda.device_count() // per_engine)
    except ImportError:
        return 1


def planned_engines(cfg: ExperimentConfig) -> int:
    """The engines a data step will get, without starting anything (plan, dry run).

    ``auto`` on the cluster engine counts the recipe's GPUs (``engine.nemo_rl.cluster``), which the job's
    Ray cluster holds once every node joined; elsewhere as :func:`resolve_engines`.
    """
    gen, n = cfg.generation, cfg.engine.nemo_rl
    if gen.engines != "auto":
        return int(gen.engines)
    if cfg.engine.name == "nemo_rl" and n is not None:
        per_engine = int(engine_resources(gen)["GPU"]) or 1
        return max(1, n.cluster.num_nodes * n.cluster.gpus_per_node // per_engine)
    return resolve_engines(gen)


def make_generator(policy: str, cfg: ExperimentConfig) -> Generator:
    """Build the generator for a policy name.

    Args:
        policy: ``random``, ``gold``, or an HF checkpoint (hub name or folder).
        cfg: The experiment config (model and generation settings).

    Returns:
        A generator: in this process, or spread over ``generation.engines`` Ray actors.
    """
    if policy == "random":
        return RandomGenerator()
    if policy == "gold":
        return GoldGenerator()
    factory = BackendFactory(policy, cfg)
    engines = resolve_engines(cfg.generation)
    if engines == 1:
        return factory()
    from nemo_act.generation.ray_pool import EnginePool

    gen = cfg.generation
    split = "even" if gen.backend == "vllm" else "grid"  # vLLM seeds each request; HF each batch
    return EnginePool(
        factory, engines, gen.batch_size, engine_resources(gen), gen.in_flight, split=split, address=gen.ray_address
    )


__all__ = [
    "BackendFactory",
    "GenerationRequest",
    "Generator",
    "GoldGenerator",
    "RandomGenerator",
    "engine_resources",
    "make_generator",
    "planned_engines",
    "resolve_engines",
    "wrap_action",
]
