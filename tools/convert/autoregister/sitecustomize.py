"""Register nemo-act's extensions in every Python process that imports the library they extend.

* Megatron-Bridge: our Olmo-2/3 bridges (``olmo3_bridge``), right after ``megatron.bridge`` is imported.
  NeMo-RL builds the Megatron model inside Ray worker processes, which never import our code.
* NeMo-RL: our reward environments and data processor (``nemo_act.engines.nemo_rl.environments.register``),
  right after ``nemo_rl.environments.utils`` (its env registry) is imported, so NeMo-RL's own
  ``examples/run_grpo.py`` / ``run_sft.py`` / ``run_dpo.py`` run our stage configs unchanged.

Putting this folder, ``tools/convert`` and the checkout on ``PYTHONPATH`` makes Python import this
``sitecustomize`` at start-up; it only installs an import hook, so processes that never touch those
libraries pay nothing. The cluster engine sets that ``PYTHONPATH`` for every step
(``nemo_act.engines.nemo_rl.interpreters.child_env``); NeMo-RL hands the driver's environment to its
workers. A ``sitecustomize`` the image already has is still run (it is chained).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path

_OURS = "nemo_act.engines.nemo_rl.environments"


def _importing(name: str) -> bool:
    """Whether ``name`` is being imported right now (in ``sys.modules``, its body not finished)."""
    module = sys.modules.get(name)
    return module is not None and bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _register_after_registry() -> None:
    """NeMo-RL's env registry just loaded: register ours, unless our module is what imported it.

    Then our module is half-loaded (its ``register`` not defined yet: ``environments.py`` imports
    ``nemo_rl.environments.utils`` near its top, which a NeMo-RL env actor does first thing) and the hook
    on our own module registers once its body has run.
    """
    if not _importing(_OURS):
        importlib.import_module(_OURS).register()


def _register_ours() -> None:
    """Our environments module just loaded (NeMo-RL's registry with it): register."""
    sys.modules[_OURS].register()


# module -> what to run right after it has been imported
_HOOKS = {
    "megatron.bridge": lambda: importlib.import_module("olmo3_bridge"),
    "nemo_rl.environments.utils": _register_after_registry,
    _OURS: _register_ours,
}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Wraps the loader of each hooked module so that its hook runs right after the module loads."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _HOOKS or fullname in _done:
            return None
        _done.add(fullname)  # find the real spec, once
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_hook(module):
            exec_module(module)
            sys.modules[fullname] = module
            try:
                _HOOKS[fullname]()
            except Exception as err:  # noqa: BLE001 - say so, leave the library (and whoever imported it) working
                print(f"[nemo-act] not registered with {fullname}: {type(err).__name__}: {err}", file=sys.stderr)

        spec.loader.exec_module = exec_then_hook  # type: ignore[method-assign]
        return spec


_done: set[str] = set()


def _chain_image_sitecustomize() -> None:
    here = Path(__file__).resolve().parent
    for entry in sys.path:
        if entry and Path(entry).resolve() != here and (Path(entry) / "sitecustomize.py").is_file():
            spec = importlib.util.spec_from_file_location("_image_sitecustomize", Path(entry) / "sitecustomize.py")
            if spec and spec.loader:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


_done.update(name for name in _HOOKS if name in sys.modules)
sys.meta_path.insert(0, _AfterImport())
_chain_image_sitecustomize()
