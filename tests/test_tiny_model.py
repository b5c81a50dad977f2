import json

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

pytestmark = pytest.mark.heavy  # the whole module: see tests/conftest.py for what heavy means


def test_tiny_model_is_a_loadable_qwen3(tiny_model_dir, cfg):
    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["head_dim"] >= 32
    assert (tiny_model_dir / "model.safetensors").exists()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert model.config.vocab_size == len(tok)
    assert sum(p.numel() for p in model.parameters()) < 2_000_000


def test_tokenizer_round_trips_any_text(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "Use thermometer on unknown substance B — 54°C <action>look around</action>"
    assert tok.decode(tok(text)["input_ids"]) == text


def test_chat_template_marks_assistant_tokens(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    msgs = [{"role": "user", "content": "Task: boil water"}, {"role": "assistant", "content": "<action>go</action>"}]
    enc = tok.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    marked = [i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m]
    assert tok.decode(marked) == "<action>go</action><|im_end|>"


def test_generate_runs(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = tok("Task:", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=5, do_sample=True, pad_token_id=tok.pad_token_id)
    assert out.shape[1] <= ids["input_ids"].shape[1] + 5
