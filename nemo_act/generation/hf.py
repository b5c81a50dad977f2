"""Hugging Face ``transformers`` generation backend (the local engine's sampler).

Prompts are rendered with the tokenizer's chat template (``enable_thinking`` from config), padded on
the left and sampled in batches of ``generation.batch_size`` with ``num_return_sequences = n``.
Each batch is seeded from (seed, first key) so a resumed run samples what a straight run would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nemo_act.common.seeding import key_int
from nemo_act.config.schema import GenerationConfig, ModelConfig, SamplingConfig
from nemo_act.generation.base import ChatModel, GenerationRequest

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class PromptTooLongError(ValueError):
    """A rendered prompt does not fit the model's context."""


def check_prompt_length(key: str, n_tokens: int, model_cfg: ModelConfig, max_new_tokens: int) -> None:
    """Raise :class:`PromptTooLongError` when a prompt leaves no room for ``max_new_tokens``."""
    if n_tokens > model_cfg.max_context_tokens - max_new_tokens:
        raise PromptTooLongError(
            f"state {key}: prompt has {n_tokens} tokens, more than model.max_context_tokens "
            f"({model_cfg.max_context_tokens}) minus max_new_tokens ({max_new_tokens})"
        )


def resolve_device(device: str) -> str:
    """Map 'auto' to 'cuda' when a GPU is visible, else 'cpu'."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


class HFGenerator(ChatModel):
    """Sample with ``model.generate`` from an HF checkpoint (hub name or folder).

    Args:
        model_cfg: Which model and how to call its chat template.
        gen_cfg: Batch size and device.
        name_or_path: Overrides ``model_cfg.name_or_path`` (e.g. a stage's checkpoint).
    """

    seeds_each_request = False  # one torch seed per batch; a row's sample depends on the rows beside it

    def __init__(self, model_cfg: ModelConfig, gen_cfg: GenerationConfig, name_or_path: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        super().__init__(model_cfg, gen_cfg, name_or_path)
        self.device = resolve_device(gen_cfg.device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.name)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype: Any = "auto" if model_cfg.dtype == "auto" else getattr(torch, _DTYPES[model_cfg.dtype])
        self.model = AutoModelForCausalLM.from_pretrained(self.name, dtype=dtype).to(self.device)
        self.model.eval()

    def _decode(self, ids: list[int]) -> str:
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id
        if eos in ids:
            ids = ids[: ids.index(eos)]
        return self.tokenizer.decode([i for i in ids if i != pad], skip_special_tokens=False)

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int
    ) -> list[list[str]]:
        """Sample ``n`` responses per request.

        Raises:
            PromptTooLongError: A prompt exceeds ``model.max_context_tokens`` minus the new tokens.
        """
        import torch

        out: list[list[str]] = []
        for start in range(0, len(requests), self.batch_size):
            batch = list(requests[start : start + self.batch_size])
            texts = [self.render(r) for r in batch]
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            lengths = enc["attention_mask"].sum(dim=1).tolist()
            for req, length in zip(batch, lengths, strict=True):
                check_prompt_length(req.key, length, self.model_cfg, sampling.max_new_tokens)
            torch.manual_seed(key_int(seed, batch[0].key) % (2**63))
            do_sample = sampling.temperature > 0
            kwargs: dict[str, Any] = {"do_sample": do_sample, "max_new_tokens": sampling.max_new_tokens}
            if do_sample:
                kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p)
            with torch.no_grad():
                gen = self.model.generate(
                    **{k: v.to(self.device) for k, v in enc.items()},
                    num_return_sequences=n,
                    pad_token_id=self.tokenizer.pad_token_id,
                    eos_token_id=self.tokenizer.eos_token_id,
                    **kwargs,
                )
            new = gen[:, enc["input_ids"].shape[1] :].tolist()
            for i in range(len(batch)):
                out.append([self._decode(new[i * n + j]) for j in range(n)])
        return out

    def score(self, requests: Sequence[GenerationRequest], continuations: Sequence[str]) -> list[float]:
        """Sum of token log-probabilities of each continuation after its request's prompt.

        Used for forced-choice evaluation: which candidate action the model finds more likely.

        Args:
            requests: The prompts.
            continuations: One assistant text per request (e.g. ``<action>go to kitchen</action>``).

        Returns:
            Log-likelihood of each continuation (eos included), in request order.
        """
        import torch

        out: list[float] = []
        eos = self.tokenizer.eos_token or ""
        for start in range(0, len(requests), self.batch_size):
            end = start + self.batch_size
            batch = list(zip(requests[start:end], continuations[start:end], strict=True))
            prompts = [self.tokenizer(self.render(r), add_special_tokens=False)["input_ids"] for r, _ in batch]
            conts = [self.tokenizer(c + eos, add_special_tokens=False)["input_ids"] for _, c in batch]
            width = max(len(p) + len(c) for p, c in zip(prompts, conts, strict=True))
            ids = torch.full((len(batch), width), self.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, (p, c) in enumerate(zip(prompts, conts, strict=True)):
                seq = p + c
                ids[row, width - len(seq) :] = torch.tensor(seq)  # left padding, as in generation
                mask[row, width - len(seq) :] = 1
            with torch.no_grad():
                logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
            target = ids[:, 1:].to(self.device)
            token_lp = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
            for row, (_, c) in enumerate(zip(prompts, conts, strict=True)):
                out.append(float(token_lp[row, width - 1 - len(c) :].sum()))
        return out
