"""Register nemo-act's Megatron-Bridge bridges (Olmo-2/3) in every Python process that imports Megatron-Bridge.

NeMo-RL builds the Megatron model inside Ray worker processes, which never import our code. Putting
this folder (and ``tools/convert``) on ``PYTHONPATH`` makes Python import this ``sitecustomize`` at
start-up; it only installs an import hook, and imports ``olmo3_bridge`` right after ``megatron.bridge``
has been imported, so processes that never touch Megatron-Bridge pay nothing. The cluster engine sets
that ``PYTHONPATH`` for its stages (``nemo_act.engines.nemo_rl.launch``); NeMo-RL hands the driver's
environment to its workers. A ``sitecustomize`` the image already has is still run (it is chained).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path

_TARGET = "megatron.bridge"


class _AfterBridgeImport(importlib.abc.MetaPathFinder):
    """Wraps the loader of ``megatron.bridge`` so that our bridges register right after it loads."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)  # find the real spec, once
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            sys.modules[fullname] = module
            importlib.import_module("olmo3_bridge")

        spec.loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


def _chain_image_sitecustomize() -> None:
    here = Path(__file__).resolve().parent
    for entry in sys.path:
        if entry and Path(entry).resolve() != here and (Path(entry) / "sitecustomize.py").is_file():
            spec = importlib.util.spec_from_file_location("_image_sitecustomize", Path(entry) / "sitecustomize.py")
            if spec and spec.loader:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


if _TARGET not in sys.modules:
    sys.meta_path.insert(0, _AfterBridgeImport())
_chain_image_sitecustomize()
