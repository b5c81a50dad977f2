"""The generation protocol every backend implements: prompts in, K sampled texts per prompt out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nemo_act.config.schema import GenerationConfig, ModelConfig, SamplingConfig
from nemo_act.prompts.render import Message, apply_chat_template


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt and what non-model policies need to answer it.

    Attributes:
        key: Stable id (state id); seeds and error messages use it.
        messages: The chat to continue.
        admissible_actions: The env's admissible actions (random policy).
        exclude: Actions a random policy must not return (the expert action for pair sampling).
        gold_action: The expert action (gold policy).
        prefill: Text the assistant's turn starts with; the model continues it and the response excludes it
            (the intervention analysis closes or fills the reasoning block this way).
        extra: What a stand-in policy needs and a model never sees (a reference solution).
    """

    key: str
    messages: list[Message]
    admissible_actions: Sequence[str] = ()
    exclude: Sequence[str] = ()
    gold_action: str | None = None
    prefill: str = ""
    extra: dict[str, str] = field(default_factory=dict)


class Generator(Protocol):
    """A policy that samples responses (text ending in an ``<action>`` tag, or anything a model writes)."""

    name: str

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int
    ) -> list[list[str]]:
        """Return ``n`` sampled responses per request, in request order.

        Args:
            requests: The prompts.
            n: Samples per prompt.
            sampling: Temperature, top-p, max new tokens.
            seed: Base seed; the same (seed, requests) give the same samples.
        """
        ...


class ChatModel:
    """What the model backends share: the checkpoint, its chat template's settings, the batch size, the prompt.

    A subclass loads ``tokenizer``; :meth:`render` is the exact text a request becomes.

    Args:
        model_cfg: Which model and how its chat template is called.
        gen_cfg: The batch size (and the backend's own settings).
        name_or_path: Overrides ``model_cfg.name_or_path`` (e.g. a stage's checkpoint).
    """

    tokenizer: Any

    def __init__(self, model_cfg: ModelConfig, gen_cfg: GenerationConfig, name_or_path: str | None = None):
        self.name = name_or_path or model_cfg.name_or_path
        self.model_cfg = model_cfg
        self.batch_size = gen_cfg.batch_size

    def render(self, request: GenerationRequest) -> str:
        """The exact prompt text the model sees for a request."""
        return apply_chat_template(self.tokenizer, request.messages, self.model_cfg.enable_thinking) + request.prefill


def seeds_each_request(generator: Generator) -> bool:
    """Whether a generator's samples for a request depend only on the request and the seed, not on its batch.

    True for vLLM (a seed per request), the built-in policies (seeded per request key) and an engine pool that
    splits evenly; False for the HF backend (one torch seed per batch, from its first request, and rows sampled
    together) and for any generator that does not say (``seeds_each_request = True`` on a class says it).
    """
    return bool(getattr(generator, "seeds_each_request", False))


def generate_batches(
    generator: Generator, batches: Iterable[Sequence[GenerationRequest]], n: int, sampling: SamplingConfig, seed: int
) -> Iterator[list[list[str]]]:
    """Answers of each batch in order: spread over the engines of a pool, one call at a time otherwise."""
    if hasattr(generator, "generate_batches"):
        yield from generator.generate_batches(batches, n, sampling, seed)  # type: ignore[attr-defined]
        return
    for batch in batches:
        yield generator.generate(batch, n, sampling, seed)


def close_generator(generator: Generator) -> None:
    """Free what a generator holds (an engine pool's actors and GPUs); nothing for one in this process."""
    close = getattr(generator, "close", None)
    if callable(close):
        close()
