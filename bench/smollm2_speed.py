"""Print what each speed lever buys on SmolLM2-135M-Instruct on this CPU, and what it costs in IL loss.

Levers, each against full float32 fine-tuning with AdamW (one process per lever, so each peak RSS is its own):

* ``full``: every parameter trains, float32 (the baseline);
* ``bf16``: the same under bfloat16 autocast, only where the CPU has AVX512-BF16 or AMX (oneDNN says so); else
  the row says float32 was kept and why (never a crash);
* ``top6``: only the top 6 of the 30 decoder layers and the final norm train (the embeddings, tied to the output
  head, and the lower 24 layers are frozen, so backward stops at layer 24);
* ``lora``: LoRA (peft, r=16, alpha=32, every linear layer of attention and MLP), the base frozen;
* ``ckpt``: full fine-tuning with gradient checkpointing (memory for time).

Each lever runs ``--steps`` optimizer steps of IL on real TextWorld-Express rows (the gold experts of the bench's
games, the IL prompt the package renders, the loss on the answer only) in batches of 8, then reports seconds per
step (the first, warm-up, left out), peak RSS and the loss on held-out rows before and after: what the lever costs in
quality. Then generation: new tokens/s for 1 and 16 sequences with and without the KV cache.

Usage: python bench/smollm2_speed.py [--steps 6] [--threads 2]   (the model is built first if it is not there)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LEVERS = ("full", "bf16", "top6", "lora", "ckpt")
BATCH = 8
GAMES = ["coin", "mapreader", "sorting", "arithmetic"]


def _cfg():
    from nemo_act.config import load_config

    return load_config(overrides=["model=smollm2_135m", "benchmark=textworld_express"])


def bf16_supported() -> tuple[bool, str]:
    """Whether bfloat16 autocast is fast here: oneDNN's own check (AVX512-BF16 or AMX), and the CPU's capability."""
    import torch

    cap = torch.backends.cpu.get_cpu_capability()
    try:
        ok = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        ok = False
    return ok, f"{cap}, oneDNN bf16 {'yes' if ok else 'no'}"


def rows(folder: Path) -> tuple[list[dict], list[dict]]:
    """IL rows of the TextWorld-Express gold experts (train fold: training; dev fold: held out)."""
    from nemo_act.data import Trajectory, read_jsonl
    from nemo_act.kinds.imitation import il_rows
    from nemo_act.steps.experts import collect_experts

    cfg = _cfg()
    tasks = [g.task for g in cfg.benchmark.games if g.game in GAMES]
    out = {}
    for split, n in (("train", 3), ("dev", 1)):
        path = folder / f"{split}.jsonl"
        if not path.exists():
            collect_experts(cfg, split, path, tasks=tasks, max_variations=n, progress=False)
        out[split] = il_rows(list(read_jsonl(path, Trajectory)), cfg)
    return out["train"], out["dev"]


def _tensors(tok, batch: list[dict]):
    """Prompt + answer ids, labels on the answer only (what TRL's completion-only loss trains), right-padded."""
    import torch

    seqs = []
    for r in batch:
        prompt = tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
        full = tok.apply_chat_template(r["prompt"] + r["completion"], tokenize=False)
        p, f = tok(prompt)["input_ids"], tok(full)["input_ids"]
        seqs.append((f, [-100] * len(p) + f[len(p) :]))
    width = max(len(f) for f, _ in seqs)
    ids = torch.full((len(seqs), width), tok.pad_token_id)
    labels = torch.full((len(seqs), width), -100)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (f, lab) in enumerate(seqs):
        ids[i, : len(f)], labels[i, : len(f)], mask[i, : len(f)] = torch.tensor(f), torch.tensor(lab), 1
    return ids, mask, labels


def one_lever(lever: str, steps: int, folder: Path) -> dict:
    """Train ``steps`` steps with one lever; seconds per step, peak RSS, held-out loss before and after."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nemo_act import wheel_model

    path = wheel_model.ensure(_cfg().model)
    train, dev = rows(folder)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    note = ""
    autocast = False
    if lever == "bf16":
        autocast, note = bf16_supported()
        if not autocast:
            note = f"no bf16 here ({note}): float32 kept"
    if lever == "top6":
        layers = model.model.layers
        for p in model.parameters():
            p.requires_grad_(False)
        for p in [*layers[-6:].parameters(), *model.model.norm.parameters()]:
            p.requires_grad_(True)
    if lever == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                                 "up_proj", "down_proj"]))  # fmt: skip
    if lever == "ckpt":
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-4 if lever == "lora" else 2e-5)

    def held_out() -> float:
        model.eval()
        with torch.no_grad():
            ids, mask, labels = _tensors(tok, dev[:16])
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
        model.train()
        return loss

    before = held_out()
    times, tokens = [], 0
    for step in range(steps):
        batch = [train[(step * BATCH + i) % len(train)] for i in range(BATCH)]
        ids, mask, labels = _tensors(tok, batch)
        tokens = max(tokens, ids.shape[1])
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    return {"lever": lever, "trainable": sum(p.numel() for p in trainable), "s_per_step": sum(times[1:]) /
            max(1, len(times) - 1), "longest": tokens, "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            / 2**20, "loss_before": before, "loss_after": held_out(), "note": note}  # fmt: skip


def generation(folder: Path) -> list[dict]:
    """New tokens/s for 1 and 16 sequences, sampled, with and without the KV cache, on real IL prompts."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nemo_act import wheel_model

    path = wheel_model.ensure(_cfg().model)
    _, dev = rows(folder)
    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    out = []
    for n, cache in ((1, True), (16, True), (1, False)):
        prompts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
                   for r in (dev * 16)[:n]]  # fmt: skip
        enc = tok(prompts, return_tensors="pt", padding=True)
        torch.manual_seed(0)
        t = time.perf_counter()
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=32, min_new_tokens=32, do_sample=True, temperature=1.0,
                                 use_cache=cache, pad_token_id=tok.pad_token_id)  # fmt: skip
        dt = time.perf_counter() - t
        new = (gen.shape[1] - enc["input_ids"].shape[1]) * n
        out.append({"sequences": n, "kv_cache": cache, "prompt_tokens": enc["input_ids"].shape[1],
                    "new_tokens": new, "seconds": dt, "tokens_per_s": new / dt})  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per lever (the first is warm-up)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--levers", default=",".join(LEVERS))
    parser.add_argument("--folder", default=None, help="where the experts are kept between runs (default: a temp)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child: one lever, JSON on stdout
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="nemo-act-smollm2-"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.one:
        print(json.dumps(generation(folder) if args.one == "generation" else one_lever(args.one, args.steps, folder)))
        return
    rows(folder)  # the experts once, before the children read them
    ok, what = bf16_supported()
    print(f"CPU: {what}; torch {torch.__version__}, {args.threads} threads; IL batches of {BATCH}")
    results = []
    for lever in [*args.levers.split(","), "generation"]:
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        cmd = [sys.executable, __file__, "--one", lever, "--steps", str(args.steps), "--threads", str(args.threads),
               "--folder", str(folder)]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if res.returncode != 0:
            print(f"{lever}: failed\n{res.stderr[-2000:]}")
            continue
        results.append(json.loads(res.stdout.strip().splitlines()[-1]))
    levers, gen = results[:-1], results[-1]
    print(
        "\n| lever | trainable params | s / step | x full | longest row (tokens) | peak RSS GB "
        "| held-out loss before -> after | note |\n|---|---:|---:|---:|---:|---:|---|---|"
    )
    base = next((r["s_per_step"] for r in levers if r["lever"] == "full"), None)
    for r in levers:
        speed = f"{base / r['s_per_step']:.2f}" if base else "-"
        print(f"| {r['lever']} | {r['trainable']:,} | {r['s_per_step']:.1f} | {speed} | {r['longest']} | "
              f"{r['rss_gb']:.1f} | {r['loss_before']:.3f} -> {r['loss_after']:.3f} | {r['note']} |")  # fmt: skip
    print("\n| sequences | KV cache | prompt tokens | new tokens | s | new tokens/s |\n|---:|---|---:|---:|---:|---:|")
    for g in gen:
        print(f"| {g['sequences']} | {g['kv_cache']} | {g['prompt_tokens']} | {g['new_tokens']} | {g['seconds']:.1f} "
              f"| {g['tokens_per_s']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
