"""Converter tests (Python 3.12 venv with Megatron-Core + Megatron-Bridge: `make test-megatron`).

Tiny random HF models are built here: their norm weights are randomised too, so a norm dropped or
swapped by a mapping changes the logits (all-ones norms would hide it). Each model folder also holds
a real byte-level BPE tokenizer with a chat template, trained on a few lines, to check that tokenizer
and template travel with the weights.
"""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "convert"))

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def save_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|im_start|>", "<|im_end|>", "<|endoftext|>"])
    tok.train_from_iterator(["go to kitchen", "open fridge", "take apple from fridge"] * 10, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)


def randomise_norms(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)


def save_model(model_cls, cfg, folder: Path) -> Path:
    """A random model of ``cfg`` (norms randomised too) with the test tokenizer, saved in ``folder``."""
    torch.manual_seed(0)
    model = model_cls(cfg)
    randomise_norms(model)
    model.save_pretrained(folder)
    save_tokenizer(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    folder = tmp_path_factory.mktemp("qwen3") / "hf"
    cfg = Qwen3Config(
        vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=256, tie_word_embeddings=False,
    )  # fmt: skip
    return save_model(Qwen3ForCausalLM, cfg, folder)


@pytest.fixture(scope="session")
def tiny_olmo3(tmp_path_factory) -> Path:
    """Olmo-3 with a 4-token sliding window on 3 of 4 layers, so the window matters on 16-token inputs."""
    from transformers import Olmo3Config, Olmo3ForCausalLM

    folder = tmp_path_factory.mktemp("olmo3") / "hf"
    cfg = Olmo3Config(
        vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, sliding_window=4, tie_word_embeddings=False,
        pad_token_id=2, bos_token_id=None, eos_token_id=1,
        layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    )  # fmt: skip
    return save_model(Olmo3ForCausalLM, cfg, folder)


@pytest.fixture(scope="session")
def tiny_olmo2(tmp_path_factory) -> Path:
    from transformers import Olmo2Config, Olmo2ForCausalLM

    folder = tmp_path_factory.mktemp("olmo2") / "hf"
    cfg = Olmo2Config(
        vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False,
        pad_token_id=2, bos_token_id=None, eos_token_id=1,
    )  # fmt: skip
    return save_model(Olmo2ForCausalLM, cfg, folder)


@pytest.fixture(scope="session")
def tiny_olmo3_32b_shape(tmp_path_factory) -> Path:
    """Olmo-3 shaped like Olmo-3.1-32B-Instruct's config.json where the 7B differs: grouped-query attention with
    5 query heads per KV head (40 / 8 there, 10 / 2 here, so TP=2 splits both), an explicit head_dim, and YaRN RoPE
    (rope_type yarn, factor 8, beta_fast 32, beta_slow 1, attention_factor 1.2079 as published) beside the sliding
    window on 3 of 4 layers. The YaRN original context is 64 here so its frequency ramp acts on 16-token inputs."""
    from transformers import Olmo3Config, Olmo3ForCausalLM

    folder = tmp_path_factory.mktemp("olmo3_32b_shape") / "hf"
    cfg = Olmo3Config(
        vocab_size=320, hidden_size=80, intermediate_size=176, num_hidden_layers=4, num_attention_heads=10,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=512, sliding_window=4, tie_word_embeddings=False,
        pad_token_id=2, bos_token_id=None, eos_token_id=1,
        rope_parameters={"rope_type": "yarn", "rope_theta": 500000.0, "factor": 8.0,
                         "original_max_position_embeddings": 64, "attention_factor": 1.2079441541679836,
                         "beta_fast": 32.0, "beta_slow": 1.0},
        layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    )  # fmt: skip
    return save_model(Olmo3ForCausalLM, cfg, folder)


@pytest.fixture(scope="session")
def tiny_qwen3_moe(tmp_path_factory) -> Path:
    """Qwen3-MoE (Qwen3-30B-A3B's architecture): every layer sparse, 4 experts, top-2 with normalised weights."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    folder = tmp_path_factory.mktemp("qwen3_moe") / "hf"
    cfg = Qwen3MoeConfig(
        vocab_size=320, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=4, num_experts_per_tok=2,
        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=256,
        tie_word_embeddings=False,
    )  # fmt: skip
    return save_model(Qwen3MoeForCausalLM, cfg, folder)
