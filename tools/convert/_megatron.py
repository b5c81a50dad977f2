"""Shared pieces of the converters: process groups, the Megatron model from a bridge, logits on fixed inputs.

Every entry point runs its ranks as processes (``torch.multiprocessing.spawn``): gloo on CPU (then the
CPU shims of :mod:`cpu_shims` apply and layers are Megatron-Core's local, non-TE ones), NCCL on GPUs
(Transformer Engine layers, as training uses). Distributed checkpoints hold Transformer Engine
parameter names either way (Megatron-Core's local spec maps its names on save and load), so a
checkpoint written on a CPU node loads into a GPU training job.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

# Inputs every check uses: 2 sequences x 16 tokens, fixed seed, ids below the smallest vocab we test.
SEQ_LEN = 16


def free_port() -> int:
    """A free TCP port on this machine for the process group's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(fn: Callable[..., Any], world: int, *args: Any, device: str) -> None:
    """Run ``fn(rank, world, port, *args)`` in ``world`` processes (one rendezvous port for all).

    On CPU where no Transformer Engine is installed (CPU nodes, CI) the ranks are forked from a forkserver that
    imported Megatron-Core and Megatron-Bridge once (:mod:`_rank_imports`), so a rank starts without importing
    them again (~15 CPU-s each here; a conversion, its logit check and the export are 3-6 rank starts); the server
    is one per process and lives as long as it. Elsewhere (GPUs; the CPU export on a GPU node, where TE's import
    may touch CUDA, which a forked child must not inherit) each rank is spawned, a fresh interpreter.
    """
    import cpu_shims
    import torch.multiprocessing as mp

    if device == "cpu" and not cpu_shims.te_installed():
        _start_forkserver()
        mp.start_processes(fn, args=(world, free_port(), *args), nprocs=world, join=True, start_method="forkserver")
    else:
        mp.spawn(fn, args=(world, free_port(), *args), nprocs=world, join=True)


def _start_forkserver() -> None:
    """Start this process's forkserver with :mod:`_rank_imports` preloaded (once; later calls return at once).

    The server is a new interpreter that finds this folder through ``PYTHONPATH`` set for its start only: Python
    3.12's forkserver accepts the parent's ``sys.path`` but does not apply it, and skips a preload module it cannot
    import without a word (then every rank imports Megatron itself again, as spawned ones do).
    """
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.set_forkserver_preload(["_rank_imports"])
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parent), saved) if p)
    try:
        forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def init_process_group(rank: int, world: int, port: int, device: str) -> None:
    """Join the process group: gloo on CPU (with the CPU shims), NCCL on GPUs."""
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if device == "cpu":
        import cpu_shims

        cpu_shims.apply()
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        torch.cuda.set_device(rank % torch.cuda.device_count())
        dist.init_process_group("nccl", rank=rank, world_size=world)


def register_our_bridges() -> None:
    """Register the bridges Megatron-Bridge does not ship (Olmo-2 / Olmo-3) with its registry."""
    import olmo3_bridge  # noqa: F401  (registration happens at import)
    from megatron.bridge.utils.instantiate_utils import register_allowed_target_prefix

    register_allowed_target_prefix("olmo3_bridge.")  # checkpoints name our layer spec; let their loader import it


# Mixture-of-experts layers on CPU: one expert MLP after another (Megatron-Core's SequentialMLP) instead of the
# grouped GEMM and fused permutation that need Transformer Engine / CUDA, and the all-gather token dispatcher
# (the all-to-all one opens a CUDA stream when it is built; dispatchers move activations, not weights).
# Checkpoints do not depend on it: TEGroupedMLP.sharded_state_dict maps its experts to SequentialMLP's keys
# ("The sharded state dict is interchangable with SequentialMLP's", megatron/core/transformer/moe/experts.py),
# so a GPU job with grouped GEMM loads what a CPU conversion wrote. Applied to models with experts only.
CPU_MOE = {"moe_grouped_gemm": False, "moe_permute_fusion": False, "moe_token_dispatcher_type": "allgather"}


# A checkpoint's layer spec (its run_config.yaml names it) -> the spec that loads it on CPU. Transformer Engine's
# layers run on CUDA only, and a NeMo-RL training checkpoint names Megatron-Bridge's TE default
# (``GPTModelProvider.transformer_layer_spec = default_layer_spec``): loaded as it says, the logit check after an
# export built TE layers (a venv with TE, the Megatron worker's) or failed to build them (without TE), then ran
# a forward on CPU tensors. Parameter names are the same either way (distributed checkpoints hold TE's names).
_GPT = "megatron.bridge.models.gpt_provider"
CPU_LAYER_SPECS = {
    f"{_GPT}.default_layer_spec": f"{_GPT}.local_layer_spec",
    f"{_GPT}.transformer_engine_layer_spec": f"{_GPT}.local_layer_spec",
    f"{_GPT}.transformer_engine_full_layer_spec": f"{_GPT}.local_layer_spec",
    "olmo3_bridge.olmo3_layer_spec": "olmo3_bridge.olmo3_local_layer_spec",
}


def checkpoint_layer_spec(ckpt: str | Path) -> str | None:
    """The layer spec a Megatron-Bridge checkpoint's ``run_config.yaml`` names (``model.transformer_layer_spec``).

    ``ckpt``: an ``iter_*`` folder or the folder holding them (its newest is read). None when it names none.
    """
    import yaml

    folder = Path(ckpt)
    if not (folder / "run_config.yaml").is_file():
        iters = sorted(folder.glob("iter_*"), key=lambda p: int(p.name.removeprefix("iter_") or 0))
        folder = iters[-1] if iters else folder
    config = folder / "run_config.yaml"
    if not config.is_file():
        return None
    spec = (yaml.safe_load(config.read_text()).get("model") or {}).get("transformer_layer_spec")
    return spec.get("_target_") if isinstance(spec, dict) else None


def load_overrides(device: str, dtype: str = "float32", ckpt: str | Path | None = None) -> dict[str, Any]:
    """Config overrides for loading any saved layout into one process (TP=PP=EP=1).

    On CPU also :data:`CPU_MOE`, the parameter type and, for a checkpoint ``ckpt`` whose config names a
    Transformer Engine layer spec, its local twin (:data:`CPU_LAYER_SPECS`). Megatron-Bridge's loader builds
    the model in the type the checkpoint's config names (``bf16: true`` for a bf16 training job), which is
    neither what a float32 logit check needs nor, for an fp32 checkpoint, what an export to a bf16 HF folder
    needs; over gloo it already turns FP8 off (``fp8: None``, ``fp8_param: False`` in
    ``training/model_load_save.py``), ``fp8_param`` is repeated here. ``dtype`` (``float32`` / ``bfloat16``):
    the type to hold the weights in (values are cast when loaded).
    """
    one: dict[str, Any] = {
        "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "expert_model_parallel_size": 1,
    }  # fmt: skip
    if device != "cpu":
        return one
    bf16 = dtype == "bfloat16"
    out = {**one, **CPU_MOE, "bf16": bf16, "fp16": False, "fp8_param": False}
    out["params_dtype"] = torch.bfloat16 if bf16 else torch.float32
    local = CPU_LAYER_SPECS.get(checkpoint_layer_spec(ckpt) or "") if ckpt is not None else None
    if local is not None:
        import importlib

        module, name = local.rsplit(".", 1)
        out["transformer_layer_spec"] = getattr(importlib.import_module(module), name)
    return out


def hf_dtype(hf_dir: str | Path) -> str:
    """The parameter type an HF checkpoint's config names (``float32`` when it names none)."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(hf_dir))
    dtype = getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None) or "float32"
    return str(dtype).removeprefix("torch.")


def build_model(bridge: Any, tp: int, pp: int, device: str, dtype: str | None = None, ep: int = 1) -> list[Any]:
    """The Megatron model of ``bridge``'s HF checkpoint with its weights, laid out over TP x PP (x EP) ranks.

    ``dtype`` (``float32`` / ``bfloat16``) sets the parameters' type; None: float32 on CPU, the HF
    config's on GPUs. ``bfloat16`` on CPU writes what a bf16 training job saves, its config saying
    ``bf16: true`` (tests of the export).
    ``ep``: expert parallel size (models with experts; carved out of the TP x DP ranks as Megatron-Core does).
    """
    provider = bridge.to_megatron_provider(load_weights=True)
    provider.tensor_model_parallel_size = tp
    provider.pipeline_model_parallel_size = pp
    if ep > 1 and not getattr(provider, "num_moe_experts", None):
        raise ValueError(f"expert parallel size {ep} given for a model without experts")
    provider.expert_model_parallel_size = ep
    if device == "cpu" and getattr(provider, "num_moe_experts", None):
        for key, value in CPU_MOE.items():
            setattr(provider, key, value)
    if dtype is not None:
        provider.params_dtype = getattr(torch, dtype)
    elif device == "cpu":
        provider.params_dtype = torch.float32
    if device == "cpu":
        from megatron.bridge.models.gpt_provider import default_layer_spec, local_layer_spec

        if provider.transformer_layer_spec is default_layer_spec:  # TE spec: the local one on CPU
            provider.transformer_layer_spec = local_layer_spec  # (our own specs choose by themselves)
        provider.bf16, provider.fp16 = provider.params_dtype == torch.bfloat16, False
        provider.use_cpu_initialization = True
    provider.finalize()
    provider.initialize_model_parallel(seed=0)
    return provider.provide_distributed_model(wrap_with_ddp=False, use_cpu_initialization=device == "cpu")


def fixed_input_ids(vocab_size: int) -> torch.Tensor:
    """The fixed token ids every comparison runs on."""
    gen = torch.Generator().manual_seed(1234)
    return torch.randint(0, min(vocab_size, 1000), (2, SEQ_LEN), generator=gen)


def megatron_logits(model: list[Any], ids: torch.Tensor) -> torch.Tensor:
    """Logits of a single-rank (TP=PP=1) Megatron GPT model, float32 on CPU."""
    m = model[0]
    m.eval()
    device = next(m.parameters()).device
    s = ids.shape[1]
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=device), diagonal=1)[None, None]
    pos = torch.arange(s, device=device).unsqueeze(0).expand(ids.shape[0], -1)
    with torch.no_grad():
        out = m(input_ids=ids.to(device), position_ids=pos, attention_mask=mask)
    return out.float().cpu()


def hf_logits(hf_dir: str | Path, ids: torch.Tensor, device: str) -> torch.Tensor:
    """Logits of an HF checkpoint in float32 (eager attention: the reference computation)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32, attn_implementation="eager")
    model.to("cuda" if device != "cpu" else "cpu").eval()
    with torch.no_grad():
        return model(ids.to(model.device)).logits.float().cpu()
