"""Library noise off in nemo-act's entry points: progress bars of transformers and datasets, FutureWarnings.

A stage or step of nemo-act shows its own bar (pairs, evaluation, one per training stage); the libraries
under it would add a bar per model load, dataset map and shard write, and deprecation FutureWarnings
that a user cannot act on. The ``nemo-act`` CLI and the runner's step processes call
:func:`quiet_libraries` once; code that imports nemo-act as a library keeps the libraries' defaults.
"""

from __future__ import annotations

import warnings

LIBRARIES = r"(transformers|trl|datasets|accelerate|huggingface_hub|peft|torch)(\.|$)"


def quiet_libraries() -> None:
    """Turn off the libraries' progress bars and their FutureWarnings for this process."""
    warnings.filterwarnings("ignore", category=FutureWarning, module=LIBRARIES)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass
    try:
        import datasets

        datasets.disable_progress_bars()
    except ImportError:
        pass
