"""Library noise off in nemo-act's entry points: progress bars of transformers and datasets, FutureWarnings.

A stage or step of nemo-act shows its own bar (pairs, evaluation, one per training stage); the libraries
under it would add a bar per model load, dataset map and shard write, and deprecation FutureWarnings
that a user cannot act on. The ``nemo-act`` CLI and the runner's step processes call
:func:`quiet_libraries` once; code that imports nemo-act as a library keeps the libraries' defaults.

The bars are turned off through the variables the libraries read when they are imported
(``HF_HUB_DISABLE_PROGRESS_BARS``, which transformers follows, and ``HF_DATASETS_DISABLE_PROGRESS_BARS``),
not by importing them: a command that stops early (a bad path, a locked run folder) answers in a fraction
of a second instead of after two seconds of imports. A value the user set is kept; child processes inherit
them.
"""

from __future__ import annotations

import os
import warnings

LIBRARIES = r"(transformers|trl|datasets|accelerate|huggingface_hub|peft|torch)(\.|$)"


def quiet_libraries() -> None:
    """Turn off the libraries' progress bars and their FutureWarnings for this process."""
    warnings.filterwarnings("ignore", category=FutureWarning, module=LIBRARIES)
    for var in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        os.environ.setdefault(var, "1")
