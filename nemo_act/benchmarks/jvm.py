"""Options for the JVMs that py4j starts for a Java-backed benchmark (ScienceWorld, TextWorld-Express).

Both simulators start their JVM with py4j's ``launch_gateway`` from their own module and take no JVM options from
their caller. :func:`jvm_options` wraps the name that module calls for the length of a block, so the JVMs started in
it get the options on their command line: only those JVMs (``JAVA_TOOL_OPTIONS`` would reach every Java program of
the process and its children), and after whatever ``JAVA_TOOL_OPTIONS`` holds, so these win.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

_LAUNCH = threading.Lock()  # the options reach py4j's launcher through the simulator's module: one start at a time


@contextmanager
def jvm_options(module: str, options: Sequence[str]) -> Iterator[None]:
    """JVMs that ``module`` starts in this block get ``options`` before its own ``javaopts``.

    Args:
        module: The simulator's module that imported py4j's ``launch_gateway`` by name (ScienceWorld 1.2.3:
            ``scienceworld.scienceworld``, line 46; TextWorld-Express 1.1.0: ``textworld_express.textworld_express``,
            whose own ``javaopts=['-Xverify:none']`` are kept).
        options: JVM command-line options.
    """
    mod = importlib.import_module(module)
    with _LAUNCH:
        launch = mod.launch_gateway

        def with_options(*args: Any, **kwargs: Any) -> Any:
            return launch(*args, **{**kwargs, "javaopts": [*options, *kwargs.get("javaopts", [])]})

        mod.launch_gateway = with_options
        try:
            yield
        finally:
            mod.launch_gateway = launch
