"""Plugins: modules a config names (a benchmark's adapter, an engine, an extension), imported by that name.

The one way code of a lower floor reaches code above it (docs/architecture.md, "The floors"): never by an
import statement, only through a name the config gives, as NeMo-RL imports an environment actor by the class path
in its config. A name without a dot in ``engine.name`` is a module of the :mod:`nemo_act.engines` package
(``local`` -> ``nemo_act.engines.local``); any other is imported as given (``my_pkg.my_engine``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

ENGINE_PACKAGE = "nemo_act.engines"


def import_module(name: str, what: str) -> ModuleType:
    """Import a module a config names.

    Args:
        name: Dotted module name.
        what: What names it, for the error (``benchmark.adapter``, ``engine.name``, ...).

    Raises:
        ValueError: It cannot be imported (the message names ``what`` and the import's own error).
    """
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise ValueError(
            f"{what}: cannot import {name!r} ({err}); put its folder on PYTHONPATH or install its package"
        ) from None


def load(ref: str) -> Any:
    """The object a ``module:name`` reference names (imported on first use)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def engine_module(name: str) -> str:
    """The module of the engine ``engine.name`` names: ``local`` -> ``nemo_act.engines.local``; dotted: as given."""
    return name if "." in name else f"{ENGINE_PACKAGE}.{name}"


def config_class(module: ModuleType, what: str, base: type) -> type:
    """A plugin module's ``CONFIG`` (the settings model of its config block), checked to subclass ``base``.

    Raises:
        ValueError: The module has no ``CONFIG``, or it does not subclass ``base``.
    """
    cls = getattr(module, "CONFIG", None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(
            f"{what}: module {module.__name__} ({getattr(module, '__file__', '?')}) needs CONFIG, a subclass of "
            f"{base.__module__}.{base.__name__} (the model of its config block)"
        )
    return cls
