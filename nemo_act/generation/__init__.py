"""Generation backends behind one protocol: hf (transformers), vllm (GPU nodes), random, gold."""

from __future__ import annotations

from nemo_act.config.schema import ExperimentConfig
from nemo_act.generation.base import GenerationRequest, Generator
from nemo_act.generation.simple import GoldGenerator, RandomGenerator, wrap_action


def make_generator(policy: str, cfg: ExperimentConfig) -> Generator:
    """Build the generator for a policy name.

    Args:
        policy: ``random``, ``gold``, or an HF checkpoint (hub name or folder).
        cfg: The experiment config (model and generation settings).

    Returns:
        A generator.
    """
    if policy == "random":
        return RandomGenerator()
    if policy == "gold":
        return GoldGenerator()
    if cfg.generation.backend == "vllm":
        from nemo_act.generation.vllm import VLLMGenerator

        return VLLMGenerator(cfg.model, cfg.generation, name_or_path=policy)
    from nemo_act.generation.hf import HFGenerator

    return HFGenerator(cfg.model, cfg.generation, name_or_path=policy)


__all__ = ["GenerationRequest", "Generator", "GoldGenerator", "RandomGenerator", "make_generator", "wrap_action"]
