"""Build a tiny random Qwen3 and a real byte-level BPE tokenizer locally, with no download.

Used by tests and the demo. The tokenizer is trained with Hugging Face ``tokenizers`` on the prompt
templates plus any corpus files given (e.g. an experts JSONL), has Qwen3's special tokens and a
Qwen3-style chat template with ``{% generation %}`` markers (so TRL can mask the loss to assistant
tokens) and the ``enable_thinking`` switch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

from nemo_act.config.schema import TinyModelSpec

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added as single tokens but not "special", as Qwen3 does for <think>: decoding with
# skip_special_tokens=True (TRL does) must keep them, or no completion would show its action tag.
TAG_TOKENS = ["<think>", "</think>", "<action>", "</action>"]

# Qwen3-style ChatML. Assistant content sits inside {% generation %} so that
# apply_chat_template(..., return_assistant_tokens_mask=True) marks exactly the trained tokens. As in
# Qwen3, enable_thinking=false puts an empty think block before the answer, in the generation prompt and
# in a rendered assistant turn alike, so a prompt is always a prefix of prompt + completion.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}"
    "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif -%}"
    "{%- endif -%}"
)


# The prompts the tiny model was first trained with: the ACT and action prompts and the three paper
# benchmarks' preambles (BPE merges do not depend on their order, measured). A fixed list: a new template (a
# new benchmark's preamble, a baseline's prompt) must not change the tokenizer, or the demo's and the pinned
# figures move (leaving the preambles out moved 81 of 1,024 tokens and the demo's ACT gain from +23.7 to +3.9).
TOKENIZER_TEMPLATES = "tokenizer_corpus.list"  # the list, one template name a line, in prompts/templates/


def _template_texts() -> Iterator[str]:
    """The texts of :data:`TOKENIZER_TEMPLATES` (without the ``{context}`` slot added later: same merges)."""
    folder = resources.files("nemo_act.prompts") / "templates"
    for name in (folder / TOKENIZER_TEMPLATES).read_text(encoding="utf-8").split():
        yield (folder / f"{name}.txt").read_text(encoding="utf-8").replace("{context}", "")


def _corpus_texts(paths: Iterable[str | Path]) -> Iterator[str]:
    """Text of corpus files; JSONL lines are flattened to their string values."""
    for path in paths:
        with Path(path).open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    yield line
                    continue
                yield from _strings(obj)


def _strings(obj: object) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def build_tokenizer(spec: TinyModelSpec, corpus: Iterable[str | Path] = ()):
    """Train a byte-level BPE tokenizer and wrap it as a transformers fast tokenizer.

    Args:
        spec: Tiny-model settings (``vocab_size``).
        corpus: Extra text or JSONL files to learn merges from.

    Returns:
        A ``PreTrainedTokenizerFast`` with Qwen3 special tokens and chat template.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = list(_template_texts()) + list(_corpus_texts(corpus))
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    fast.add_tokens(TAG_TOKENS)
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_tiny_model(out: str | Path, spec: TinyModelSpec, corpus: Iterable[str | Path] = ()) -> Path:
    """Build and save a tiny random Qwen3 with its tokenizer.

    Args:
        out: Folder to write (``save_pretrained`` layout: safetensors, config, tokenizer).
        spec: Sizes and seed.
        corpus: Extra files for the tokenizer's merges.

    Returns:
        The output folder.
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer(spec, corpus)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(spec.seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
