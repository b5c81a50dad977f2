"""CPU-only shims for Megatron-Core / Megatron-Bridge checkpoint conversion (never used on GPUs).

Converting on a login or CPU node hits four things that assume CUDA or Transformer Engine (TE).
Each fix is here, in one place; :func:`apply` applies them all, and the converters call it only for
``--device cpu`` (never on the GPU path), whether or not a GPU is visible (the cluster engine exports on
CPU on GPU nodes, in the Megatron worker venv where TE is installed; the layer spec then comes from
``_megatron.load_overrides``):

1. Megatron-Bridge imports ``transformer_engine.pytorch`` at import time in its LoRA layers (and a few
   model bridges). TE cannot be installed without CUDA, and conversion never calls it, so
   :func:`import_bridge_without_te` imports ``megatron.bridge`` with a placeholder ``transformer_engine``
   visible *only during that import*: Megatron-Core is imported first (its ``HAVE_TE`` flags are then
   False, so every layer it builds is a local, non-TE one), and the placeholder is removed afterwards.
2. ``torch.cuda.current_device`` / ``get_rng_state`` / ``set_rng_state`` / ``synchronize`` are
   called by the rotary embedding and by distributed checkpoint save/load; on CPU they become no-ops
   that return CPU values (:func:`patch_cuda_calls`); attention masks built with ``device="cuda"``
   are built on CPU (:func:`patch_cuda_masks`).
3. Megatron's tensor-parallel RNG tracker must exist before model construction: the provider's
   ``initialize_model_parallel(seed=...)`` sets it up (``_megatron.build_model``); its CUDA RNG calls
   go through item 2.
4. The process group is gloo, created before Megatron's parallel state, and models are built with
   ``use_cpu_initialization=True`` and the local layer spec (``_megatron``, not this module).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

_TE = "transformer_engine"


class _Placeholder(types.ModuleType):
    """A module whose every attribute is a new empty class or sub-module (``te.ops.Sequential`` ...)."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name[:1].isupper():
            value = type(name, (), {"__module__": self.__name__})
        else:
            value = _Placeholder(f"{self.__name__}.{name}")
            sys.modules[value.__name__] = value
        setattr(self, name, value)
        return value


class _PlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``transformer_engine`` and its sub-modules to :class:`_Placeholder` modules."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == _TE or fullname.startswith(_TE + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Placeholder(spec.name)
        module.__path__ = []  # a package: sub-modules resolve through this finder too
        module.__version__ = "0.0.0+cpu-placeholder"
        return module

    def exec_module(self, module):
        return None


def te_installed() -> bool:
    """Whether a real Transformer Engine is importable (then no placeholder is ever used)."""
    return importlib.util.find_spec(_TE) is not None


def import_bridge_without_te() -> types.ModuleType:
    """Import ``megatron.bridge`` on a machine without TE (see the module docstring, item 1)."""
    if te_installed() or "megatron.bridge" in sys.modules:
        return importlib.import_module("megatron.bridge")
    for name in (  # Megatron-Core first: it records "no TE" and builds local layers
        "megatron.core",
        "megatron.core.utils",
        "megatron.core.transformer",
        "megatron.core.transformer.transformer_config",
        "megatron.core.models.gpt.gpt_model",
        "megatron.core.models.gpt.gpt_layer_specs",
        "megatron.core.tensor_parallel",
        "megatron.core.dist_checkpointing",
        "megatron.core.optimizer",
    ):
        importlib.import_module(name)
    with contextlib.suppress(ImportError):  # ModelOpt (checkpoint loading) must not see the placeholder either
        importlib.import_module("modelopt.torch.opt.plugins.mcore_dist_checkpointing")
    finder = _PlaceholderFinder()
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module("megatron.bridge")
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n == _TE or n.startswith(_TE + ".")]:
            del sys.modules[name]


def patch_cuda_calls() -> None:
    """Make the CUDA calls of rotary embeddings and checkpoint I/O harmless on CPU (item 2)."""
    import torch

    # Not only where no GPU is visible: the cluster's export runs on CPU on a GPU node (its Megatron worker
    # venv, CUDA visible), and there the rotary embedding must not put its tensors on the GPU either.
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]  # used as a device= argument
    torch.cuda.synchronize = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()  # type: ignore[assignment]
    torch.cuda.get_rng_state_all = lambda *a, **k: [torch.get_rng_state()]  # type: ignore[assignment]
    torch.cuda.set_rng_state = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.set_rng_state_all = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.manual_seed = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.manual_seed_all = lambda *a, **k: None  # type: ignore[assignment]
    # Megatron's RNG tracker calls the torch.cuda.random module's functions directly
    torch.cuda.random.get_rng_state = torch.cuda.get_rng_state  # type: ignore[assignment]
    torch.cuda.random.set_rng_state = torch.cuda.set_rng_state  # type: ignore[assignment]
    torch.cuda.random.manual_seed = torch.cuda.manual_seed  # type: ignore[assignment]


def patch_cuda_masks() -> None:
    """Megatron's attention masks are built with ``device="cuda"``: build them on CPU (item 2)."""
    import torch
    from megatron.core.fusions import fused_softmax

    def causal(sq: int) -> torch.Tensor:
        return torch.triu(torch.ones(sq, sq), diagonal=1).bool()

    def sliding_window(sq: int, skv: int, window_size) -> torch.Tensor:
        m = torch.ones(sq, skv, dtype=torch.bool)
        return ~torch.tril(torch.triu(m, diagonal=skv - sq - window_size[0]), diagonal=skv - sq + window_size[1])

    fused_softmax.get_default_causal_mask = causal
    fused_softmax.get_sliding_window_causal_mask = sliding_window


def apply() -> None:
    """Apply every CPU shim (call on CPU only, before building or loading a Megatron model)."""
    patch_cuda_calls()
    import_bridge_without_te()
    patch_cuda_masks()
