r"""The parts of the device check (bench/device_check.sh): one GPU, no internet, what is installed.

    python bench/device_check.py probe|rate|hf|act|megatron|summary [--out DIR] [--smoke]

* ``probe``: CUDA, the GPU, bf16, and which of torch, transformers, TRL, datasets, Transformer Engine,
  Megatron-Core, Megatron-Bridge, flash-attn, vLLM, NeMo-RL import (with versions).
* ``hf``: forward + backward of a randomly initialised Qwen3-0.6B-shaped model (28 layers, hidden 1024,
  16/8 heads of 128, FFN 3072, vocabulary 151,936) in bf16 with transformers (SDPA attention):
  trained tokens/s, MFU, peak memory.
* ``act``: ACT GRPO steps of the local engine (nemo_act.engines.local, TRL's GRPOTrainer) on the same
  model shape in bf16 on the GPU, on ACT rows made from synthetic ScienceWorld-like states (the real
  prompt template, two candidates, 30 admissible actions): seconds per step, generated and trained
  tokens/s, peak memory. A random model never emits the end of turn, so every completion runs to
  ``max_completion_length``: the slow case.
* ``megatron``: forward + backward of the same shape as a Megatron-Core GPTModel (Transformer Engine
  layers when TE imports, else Megatron's local ones) on one GPU: tokens/s, MFU, peak memory.
* ``rate``: requests/s of one generation engine on the 8B ALFWorld recipe's request shape (``--prompt-tokens``
  3,000, ``--completion`` 256 new tokens, ``--requests`` at once), what ``generation.engine_rate`` of the
  cluster layout wants (docs/performance.md holds an estimate from vLLM's published figures until this runs):
  vLLM's offline ``LLM.generate`` on a Qwen3-8B-shaped model with dummy weights (``load_format="dummy"``:
  nothing to download; the throughput is the shape's) when vLLM imports, else the transformers model of the
  ``hf`` part (flagged in the result), plus the latency of one env step's call (16 requests).
* ``summary``: the table of every part's JSON in ``--out``.

MFU = (6 x parameters + 12 x layers x hidden x sequence) FLOPs per trained token x tokens/s over the
GPU's dense bf16 peak (H100/H200 SXM: 989 TFLOPS; ``--peak-tflops``). ``--smoke`` runs a tiny shape on
the CPU: what CI can check of this script without a GPU.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# nemo_act from this checkout whatever the working directory and PYTHONPATH. Nothing of nemo_act is imported at
# the top: its config schema needs pydantic and yaml, which a device image may lack; only the act part needs them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
LOCAL_ENGINE = ("omegaconf", "pydantic", "yaml", "trl", "datasets", "rich")  # what the act part imports beyond torch

# Qwen/Qwen3-0.6B's config.json
SHAPE = {"hidden": 1024, "ffn": 3072, "layers": 28, "heads": 16, "kv_heads": 8, "head_dim": 128, "vocab": 151936}
# Qwen/Qwen3-8B's config.json (the rate part's engine)
SHAPE_8B = {"hidden": 4096, "ffn": 12288, "layers": 36, "heads": 32, "kv_heads": 8, "head_dim": 128, "vocab": 151936}
SMOKE = {"hidden": 64, "ffn": 128, "layers": 2, "heads": 2, "kv_heads": 1, "head_dim": 32, "vocab": 4096}
PACKAGES = [
    "torch", "transformers", "trl", "datasets", "accelerate", "transformer_engine", "megatron.core",
    "megatron.bridge", "flash_attn", "vllm", "nemo_rl", "omegaconf", "pydantic",
]  # fmt: skip


def _write(out: Path, part: str, result: dict[str, Any]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{part}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({part: result}), flush=True)
    return result


def _device(smoke: bool) -> str:
    import torch

    if smoke:
        return "cpu"
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible (use --smoke on a CPU)")
    return "cuda"


def _peak_gb(device: str) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None


def _flops_per_token(params: int, shape: dict[str, int], seq: int) -> float:
    return 6 * params + 12 * shape["layers"] * shape["hidden"] * seq


def probe(args: argparse.Namespace) -> dict[str, Any]:
    """What is installed and what the GPU is."""
    import torch

    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            mod = importlib.import_module(name)
            found[name] = str(getattr(mod, "__version__", "present"))
        except Exception as err:  # an import that crashes counts as absent, with why
            found[name] = None if isinstance(err, ImportError) else f"import fails: {type(err).__name__}"
    out: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(), "packages": found}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        out |= {
            "gpu": props.name,
            "gpu_memory_gb": round(props.total_memory / 2**30, 1),
            "capability": f"{props.major}.{props.minor}",
            "cuda": torch.version.cuda,
            "bf16": torch.cuda.is_bf16_supported(),
            "gpus": torch.cuda.device_count(),
        }
    else:
        out["gpu"] = None
    return _write(args.out, "probe", out)


def _qwen3_config(shape: dict[str, int], tied: bool = True):
    """A Qwen3 causal-LM config of ``shape``, naming its architecture as Qwen/Qwen3-8B's config.json does.

    A saved config without ``architectures`` is mapped by vLLM from its ``model_type`` (vLLM 0.20.0
    ``vllm/transformers_utils/config.py:743-753``), and ``qwen3`` alone resolves to the pooling ``Qwen3Model``,
    whose engine refuses ``generate``.
    """
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=shape["vocab"], hidden_size=shape["hidden"], intermediate_size=shape["ffn"],
        num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"], head_dim=shape["head_dim"], max_position_embeddings=40960,
        tie_word_embeddings=tied, attn_implementation="sdpa", architectures=["Qwen3ForCausalLM"],
    )  # fmt: skip


def _qwen3(shape: dict[str, int], device: str):
    import torch
    from transformers import Qwen3ForCausalLM

    config = _qwen3_config(shape)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return Qwen3ForCausalLM(config).to(device=device, dtype=dtype)


def _time_steps(step, steps: int, device: str) -> float:
    import torch

    step()  # warm-up (kernels, allocator)
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / steps


def hf(args: argparse.Namespace) -> dict[str, Any]:
    """Forward + backward throughput of the transformers model."""
    import torch

    device = _device(args.smoke)
    shape = SMOKE if args.smoke else SHAPE
    batch, seq = (2, 64) if args.smoke else (args.batch, args.seq)
    model = _qwen3(shape, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, shape["vocab"], (batch, seq), device=device)

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    sec = _time_steps(step, 2 if args.smoke else args.steps, device)
    params = sum(p.numel() for p in model.parameters())
    tps = batch * seq / sec
    mfu = _flops_per_token(params, shape, seq) * tps / (args.peak_tflops * 1e12)
    result = {"params_m": round(params / 1e6, 1), "batch": batch, "seq": seq, "step_s": round(sec, 4),
              "tokens_per_s": round(tps), "mfu": round(mfu, 4), "peak_gb": _peak_gb(device)}  # fmt: skip
    return _write(args.out, "hf", result)


def _act_rows(cfg, n: int) -> list[dict[str, Any]]:
    """ACT rows from synthetic ScienceWorld-like states through the core's own prompt and rows."""
    from nemo_act.data.records import Pair, State
    from nemo_act.kinds.act import act_rows

    actions = [f"move {a} to {b}" for a in ("apple", "seed", "pot", "jug", "lighter") for b in range(6)]
    pairs = []
    for i in range(n):
        obs = (f"This room is called the greenhouse. In it, you see: a flower pot {i}, a seed jar, " * 12).strip()
        state = State(task_description="Your task is to grow an apple. First, focus on a seed.", history=[],
                      step=i + 1, observation=obs, admissible_actions=actions)  # fmt: skip
        expert, alt = actions[i % 30], actions[(i + 7) % 30]
        first = i % 2
        cands = [expert, alt] if first == 0 else [alt, expert]
        pairs.append(Pair(pair_id=f"s/{i}#0", state_id=f"s/{i}", benchmark="scienceworld", state=state,
                          expert_action=expert, alternative_action=alt, candidates=cands, expert_index=first,
                          candidates_admissible=[True, True], policy="random"))  # fmt: skip
    return act_rows(pairs, cfg)


def act(args: argparse.Namespace) -> dict[str, Any]:
    """ACT GRPO steps of the local engine (TRL) in bf16 on the GPU (skipped, with the reason, without its packages)."""
    if missing := [name for name in LOCAL_ENGINE if importlib.util.find_spec(name) is None]:
        why = f"the local engine needs {', '.join(missing)} (bench/device_check.sh: carry their wheels in ./wheels)"
        return _write(args.out, "act", {"skipped": why})
    from transformers import GenerationConfig

    from nemo_act.config import load_config
    from nemo_act.config.schema import TinyModelSpec
    from nemo_act.engines.local.stages import train_stage
    from nemo_act.tiny_model import build_tokenizer

    device = _device(args.smoke)
    shape = SMOKE if args.smoke else SHAPE
    tmp = Path(tempfile.mkdtemp(prefix="device-act-"))
    tok = build_tokenizer(TinyModelSpec(vocab_size=4096, hidden_size=64, intermediate_size=64, num_layers=1,
                                        num_heads=1, num_kv_heads=1, head_dim=32, max_position_embeddings=64,
                                        seed=0))  # fmt: skip
    model = _qwen3({**shape, "vocab": max(shape["vocab"], len(tok))}, "cpu")
    model.config.eos_token_id, model.config.pad_token_id = tok.eos_token_id, tok.pad_token_id
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model.save_pretrained(tmp / "model")
    tok.save_pretrained(tmp / "model")
    # the smoke's one GRPO group per step: the CPU run checks the code path, not the GPU's figure
    steps, completion, batch = (2, 16, 8) if args.smoke else (args.steps, args.completion, 32)
    cfg = load_config(
        overrides=[
            f"model.name_or_path={tmp / 'model'}", "model.dtype=" + ("bfloat16" if device == "cuda" else "float32"),
            f"generation.device={device}", f"train.act.max_steps={steps}", f"train.act.batch_size={batch}",
            "train.act.grad_accum=1", "train.act.num_generations=8", f"train.act.max_completion_length={completion}",
            "train.act.logging_steps=1", "train.act.save_steps=1000", "train.act.learning_rate=1e-6",
        ]
    )  # fmt: skip
    rows = _act_rows(cfg, 64)
    t = time.perf_counter()
    out = train_stage("act", str(tmp / "model"), rows, cfg, tmp / "act")
    wall = time.perf_counter() - t
    logs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    logs = [h for h in logs if "completions/mean_length" in h]
    generated = sum(h["completions/mean_length"] for h in logs) * cfg.train.act.batch_size
    text = tok.apply_chat_template(rows[0]["prompt"], tokenize=False, add_generation_prompt=True)
    prompt_tokens = len(tok(text, add_special_tokens=False)["input_ids"])
    trained = (prompt_tokens + completion) * cfg.train.act.batch_size * len(logs)
    result = {"steps": len(logs), "completions_per_step": cfg.train.act.batch_size, "prompt_tokens": prompt_tokens,
              "completion_tokens": completion, "wall_s": round(wall, 1),
              "step_s": round(wall / max(len(logs), 1), 2), "generated_tokens_per_s": round(generated / wall),
              "trained_tokens_per_s": round(trained / wall), "peak_gb": _peak_gb(device)}  # fmt: skip
    return _write(args.out, "act", result)


def megatron(args: argparse.Namespace) -> dict[str, Any]:
    """Megatron-Core GPTModel forward + backward (TE layers when TE imports)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    device = _device(args.smoke)
    if device != "cuda":
        raise SystemExit("megatron: needs a GPU (Megatron-Core's fused paths); tested on CPU in tests_megatron")
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt import gpt_layer_specs as specs
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer.transformer_config import TransformerConfig

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(0)
    try:
        import transformer_engine  # noqa: F401

        spec, layers = specs.get_gpt_layer_with_transformer_engine_spec(qk_layernorm=True), "transformer_engine"
    except ImportError:
        spec, layers = specs.get_gpt_layer_local_spec(qk_layernorm=True, normalization="RMSNorm"), "local"
    s = SHAPE
    config = TransformerConfig(
        num_layers=s["layers"], hidden_size=s["hidden"], ffn_hidden_size=s["ffn"], num_attention_heads=s["heads"],
        num_query_groups=s["kv_heads"], kv_channels=s["head_dim"], normalization="RMSNorm", gated_linear_unit=True,
        activation_func=F.silu, add_bias_linear=False, qk_layernorm=True, bf16=True, params_dtype=torch.bfloat16,
        attention_dropout=0.0, hidden_dropout=0.0,
    )  # fmt: skip
    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=s["vocab"],
                     max_sequence_length=args.seq, position_embedding_type="rope", rotary_base=1000000,
                     share_embeddings_and_output_weights=True).cuda()  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, s["vocab"], (args.batch, args.seq), device="cuda")
    pos = torch.arange(args.seq, device="cuda").unsqueeze(0).expand(args.batch, -1)
    mask = torch.triu(torch.ones(args.seq, args.seq, dtype=torch.bool, device="cuda"), 1)[None, None]

    def step() -> None:
        loss = model(input_ids=ids, position_ids=pos, attention_mask=mask, labels=ids).float().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    sec = _time_steps(step, args.steps, "cuda")
    params = sum(p.numel() for p in model.parameters())
    tps = args.batch * args.seq / sec
    mfu = _flops_per_token(params, s, args.seq) * tps / (args.peak_tflops * 1e12)
    result = {"layers": layers, "params_m": round(params / 1e6, 1), "batch": args.batch, "seq": args.seq,
              "step_s": round(sec, 4), "tokens_per_s": round(tps), "mfu": round(mfu, 4),
              "peak_gb": _peak_gb("cuda")}  # fmt: skip
    dist.destroy_process_group()
    return _write(args.out, "megatron", result)


class StepFailed(SystemExit):
    """A part stopped at a named step: its message is the part's last line."""


@contextmanager
def _step(part: str, name: str, out: Path, measured: dict[str, Any]) -> Iterator[None]:
    """Run one step of a part; on failure write what was measured so far and end with one line naming the step."""
    try:
        yield
    except Exception as err:
        why = (str(err).strip().splitlines() or [""])[-1]
        measured["failed"] = f"{name}: {type(err).__name__}: {why}"
        _write(out, part, measured)
        raise StepFailed(f"{part}: failed at {name}: {type(err).__name__}: {why}") from err


def _vllm_rate(args: argparse.Namespace, prompts: list[list[int]], step_call: int, part: str) -> dict[str, Any]:
    """The rate of vLLM's offline engine.

    Its version and the engine's arguments are printed before ``LLM(...)`` starts, so a start-up that fails still
    says what it tried; each later step is named when it fails.
    """
    import vllm
    from vllm import LLM, SamplingParams

    tmp = Path(tempfile.mkdtemp(prefix="device-rate-"))
    _qwen3_config(SHAPE_8B, tied=False).save_pretrained(tmp)  # Qwen3-8B's output layer is its own
    engine = {"model": str(tmp), "load_format": "dummy", "skip_tokenizer_init": True, "dtype": "bfloat16", "seed": 0,
              "max_model_len": args.prompt_tokens + args.completion + 64, "gpu_memory_utilization": 0.85}  # fmt: skip
    invariant = os.environ.get("VLLM_BATCH_INVARIANT", "0")
    print(f"{part}: vLLM {vllm.__version__}, VLLM_BATCH_INVARIANT={invariant}, Qwen3-8B shape with dummy weights, "
          f"LLM({json.dumps(engine)})", flush=True)  # fmt: skip
    measured: dict[str, Any] = {"engine": f"vllm {vllm.__version__}", "batch_invariant": invariant}
    t = time.perf_counter()
    with _step(part, "LLM(...) start-up", args.out, measured):
        llm = LLM(**engine)
    measured["startup_s"] = round(time.perf_counter() - t, 1)
    loaded = llm.llm_engine.model_config.architecture  # "the architecture vllm actually used" (config/model.py:778)
    measured["model"] = f"Qwen3-8B shape, dummy weights, {loaded}"
    print(f"{part}: started in {measured['startup_s']} s, model class {loaded}", flush=True)
    sampling = SamplingParams(max_tokens=args.completion, ignore_eos=True, detokenize=False, temperature=1.0)
    batch = [{"prompt_token_ids": p} for p in prompts]
    with _step(part, "warm-up generate (2 requests)", args.out, measured):
        llm.generate(batch[:2], sampling, use_tqdm=False)
    t = time.perf_counter()
    with _step(part, f"generate ({len(batch)} requests)", args.out, measured):
        outs = llm.generate(batch, sampling, use_tqdm=False)
    measured["wall_s"] = round(time.perf_counter() - t, 2)
    measured["generated"] = sum(len(o.outputs[0].token_ids) for o in outs)
    t = time.perf_counter()
    with _step(part, f"one env step's call ({step_call} requests)", args.out, measured):
        llm.generate(batch[:step_call], sampling, use_tqdm=False)
    measured["step_call_s"] = round(time.perf_counter() - t, 2)
    return measured


def _hf_rate(args: argparse.Namespace, prompts: list[list[int]], step_call: int, part: str) -> dict[str, Any]:
    import torch

    device = _device(args.smoke)
    shape = SMOKE if args.smoke else SHAPE
    model = _qwen3(shape, device).eval()
    import transformers

    print(f"rate: transformers {transformers.__version__} (not vLLM), model class {type(model).__name__}", flush=True)
    ids = torch.tensor(prompts, device=device)

    def generate(n: int) -> float:
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(input_ids=ids[:n], attention_mask=torch.ones_like(ids[:n]), do_sample=True,
                           max_new_tokens=args.completion, min_new_tokens=args.completion, pad_token_id=0)  # fmt: skip
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t

    generate(2)  # warm-up
    wall = generate(len(prompts))
    return {"engine": "hf (not the cluster's engine: vLLM is)", "model": f"Qwen3 {shape['layers']} layers, "
            f"hidden {shape['hidden']}, random", "wall_s": round(wall, 2),
            "generated": len(prompts) * args.completion, "step_call_s": round(generate(step_call), 2)}  # fmt: skip


def rate(args: argparse.Namespace, invariant: bool = False) -> dict[str, Any]:
    """Requests/s of one generation engine on the 8B recipe's request shape.

    ``invariant`` (the ``rate-invariant`` part): the same with vLLM's batch invariance on (``VLLM_BATCH_INVARIANT=1``
    in this process only, as ``generation.vllm.batch_invariant`` sets it in the data steps' engine actors), so the
    summary can say what it costs.
    """
    import random

    part = "rate-invariant" if invariant else "rate"
    if args.smoke:
        args.requests, args.prompt_tokens, args.completion = 4, 48, 8
    try:
        import vllm  # noqa: F401

        measure = _hf_rate if args.smoke else _vllm_rate
    except ImportError:
        measure = _hf_rate
    if invariant and measure is _hf_rate:
        return _write(args.out, part, {"skipped": "batch invariance is vLLM's: vLLM does not run here"})
    if invariant:
        os.environ["VLLM_BATCH_INVARIANT"] = "1"  # vLLM reads it when the engine starts (vllm/envs.py:521)
    rng = random.Random(0)
    vocab = (SMOKE if args.smoke else SHAPE)["vocab"]
    prompts = [[rng.randrange(1, vocab) for _ in range(args.prompt_tokens)] for _ in range(args.requests)]
    step_call = min(16, args.requests)
    result = measure(args, prompts, step_call, part)
    result |= {"requests": args.requests, "prompt_tokens": args.prompt_tokens, "new_tokens": args.completion,
               "requests_per_s": round(args.requests / result["wall_s"], 3),
               "output_tokens_per_s": round(result["generated"] / result["wall_s"]), "step_call": step_call,
               "peak_gb": _peak_gb(_device(args.smoke))}  # fmt: skip
    return _write(args.out, part, result)


def batch_invariance_cost(out: Path) -> str | None:
    """One line: output tokens/s of the rate part with and without batch invariance (None until both ran)."""
    try:
        off = json.loads((out / "rate.json").read_text())["output_tokens_per_s"]
        on = json.loads((out / "rate-invariant.json").read_text())["output_tokens_per_s"]
    except (OSError, KeyError, ValueError):
        return None
    return f"batch invariance: {on} output tokens/s with, {off} without ({on / off:.2f}x)"


def summary(args: argparse.Namespace) -> dict[str, Any]:
    """Print every part's result found in ``--out`` as one Markdown table."""
    rows = []
    for part in ("probe", "rate", "rate-invariant", "hf", "act", "megatron"):
        path = args.out / f"{part}.json"
        if not path.exists():
            rows.append(f"| {part} | not run or failed (see its log in {args.out}) |")
            continue
        data = json.loads(path.read_text())
        if part == "probe":
            pkgs = ", ".join(f"{k} {v}" for k, v in data["packages"].items() if v)
            rows.append(f"| probe | {data.get('gpu')} ({data.get('gpu_memory_gb')} GB), CUDA {data.get('cuda')}, "
                        f"bf16 {data.get('bf16')}; {pkgs} |")  # fmt: skip
        else:
            rows.append(f"| {part} | " + ", ".join(f"{k} {v}" for k, v in data.items()) + " |")
    print("| part | result |\n|---|---|\n" + "\n".join(rows))
    if cost := batch_invariance_cost(args.out):
        print(f"\n{cost}")
    return {}


def main(argv: list[str] | None = None) -> int:
    """Run one part."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", choices=["probe", "rate", "rate-invariant", "hf", "act", "megatron", "summary"])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "device_check_out"))
    p.add_argument("--smoke", action="store_true", help="tiny shape on the CPU (CI)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--completion", type=int, default=256, help="act, rate: tokens per completion")
    p.add_argument("--requests", type=int, default=256, help="rate: requests in one call")
    p.add_argument("--prompt-tokens", type=int, default=3000, help="rate: tokens per prompt (an ALFWorld step)")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of the GPU")
    args = p.parse_args(argv)
    parts = {"probe": probe, "rate": rate, "rate-invariant": lambda a: rate(a, invariant=True), "hf": hf, "act": act,
             "megatron": megatron, "summary": summary}  # fmt: skip
    parts[args.part](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
