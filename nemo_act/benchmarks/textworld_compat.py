"""TextWorld 1.7.0 on Python 3.13: its grammar's ``{expression}`` symbols evaluated as on Python <= 3.12.

``textworld/envs/pddl/textgen/__init__.py`` (textworld 1.7.0, the newest release; alfworld 0.4.2 needs
it), lines 94-97::

    def derive(self, context=None):
        context = context or self.context
        locals().update(context["variables"])
        value = eval(self.expression)

Until Python 3.12 ``locals()`` in a function returned the frame's own dict, which ``eval`` then read, so
the grammar's variables (``r``, ``o``, ...) were in scope. PEP 667 (Python 3.13) made ``locals()`` a
snapshot: the update is lost and ``eval`` raises ``NameError: name 'r' is not defined`` on every ALFWorld
``reset()``. NeMo-RL's image runs Python 3.13.13, so every ALFWorld step of a cluster job failed.

:func:`apply` replaces that one method with one that hands ``eval`` the same names explicitly: the module's
globals, and as locals the method's own (``self``, ``context``) with the variables over them, which is what
the frame held on Python <= 3.12. It patches only a ``derive`` that still calls ``locals()`` (a fixed
TextWorld is left alone), on every Python (one code path, tested on 3.11 and 3.13), and the ALFWorld adapter
calls it before it builds an env, so users of the image need no patched site-packages.
"""

from __future__ import annotations

from typing import Any


def apply() -> bool:
    """Patch ``EvalSymbol.derive`` where it relies on ``locals()``; True when it was (or already is) patched."""
    from textworld.envs.pddl import textgen

    symbol = textgen.EvalSymbol
    if getattr(symbol.derive, "_nemo_act_compat", False):
        return True
    if "locals" not in symbol.derive.__code__.co_names:
        return False
    namespace = vars(textgen)

    def derive(self: Any, context: dict | None = None) -> list:
        context = context or self.context
        frame = {"self": self, "context": context, **context["variables"]}
        return [textgen.TerminalSymbol(eval(self.expression, namespace, frame))]

    derive._nemo_act_compat = True  # type: ignore[attr-defined]
    derive._original = symbol.derive  # type: ignore[attr-defined]
    derive.__doc__ = symbol.derive.__doc__
    symbol.derive = derive
    return True
