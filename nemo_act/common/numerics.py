"""Which float code paths a CPU run takes: each CPU's fastest (``native``) or one for all x86-64 (``portable``).

PyTorch and the math libraries it calls pick their kernels by what the CPU offers (AVX2, AVX-512, AMX), and
the kernels round differently: the same run on two CPU models gives other floats, so a tiny model samples
other tokens and a count moves (seen: the demo's held-out pairs were 448 on an Intel AVX-512/AMX machine, 449
there with everything held to AVX2, 450 on an AMD EPYC machine held the same way). ``cpu_numerics: portable``
holds every x86-64 CPU, Intel's or AMD's, to one set of paths, through the switches the libraries read when they
start:

- ``ATEN_CPU_CAPABILITY=avx2``: PyTorch's own vectorised kernels (``aten/src/ATen/native/DispatchStub.cpp``),
  the same code on every CPU with AVX2;
- ``MKL_CBWR=COMPATIBLE``: oneMKL's conditional numerical reproducibility in the one mode it keeps on non-Intel
  CPUs (its SSE2 branch). ``MKL_CBWR=AVX2``, tried first, is ignored on AMD: ``MKL_VERBOSE=1`` shows
  ``CNR:AUTO`` on every SGEMM there and the floats of AMD's own branch (2026-12-06, oneMKL 2024.2 in torch 2.13);
- ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN's kernels (none of the tiny model's float32 ops reach oneDNN today).

A variable the user set is left as it is. Set before torch is imported (the CLI imports it only in the
step that needs it), so it holds in this process and in every step, trainer and env worker it starts. Other
CPU architectures (aarch64, as on GH200 nodes) keep their one path: their floats differ from x86-64's.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Literal

PORTABLE = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def apply_cpu_numerics(mode: Literal["native", "portable"]) -> dict[str, str]:
    """Hold this process and its children to ``mode``'s code paths.

    Args:
        mode: ``native`` (nothing changes) or ``portable`` (the paths above on x86-64).

    Returns:
        The variables set (none: native, another architecture, or each already set by the user).

    Raises:
        RuntimeError: ``portable`` asked for after torch was imported in this process (its paths are chosen).
    """
    if mode == "native" or platform.machine().lower() not in ("x86_64", "amd64"):
        return {}
    todo = {k: v for k, v in PORTABLE.items() if k not in os.environ}
    if todo and "torch" in sys.modules:
        raise RuntimeError(
            "cpu_numerics=portable: torch is already imported in this process, its CPU code paths are chosen; "
            f"set {', '.join(f'{k}={v}' for k, v in todo.items())} in the environment instead"
        )
    os.environ.update(todo)
    return todo
