"""A nemo-act stage's rows as a NeMo-RL dataset: what ``data.train.dataset_name`` names by dotted path.

NeMo-RL v0.7.0 loads a training set by ``data.train.dataset_name``: a registered name or a dotted path
to a class (``nemo_rl/data/datasets/response_datasets/__init__.py`` ``load_response_dataset``, and
``preference_datasets/__init__.py`` ``load_preference_dataset``), built with the ``data.train`` keys,
then ``set_task_spec`` / ``set_processor`` (``nemo_rl/data/datasets/raw_dataset.py``). So one of our
stage YAMLs runs with NeMo-RL's own ``examples/run_grpo.py``, ``run_sft.py`` and ``run_dpo.py``, and our
driver goes through the same loaders (``setup_response_data``, ``setup_preference_data``).

``data_path`` is a stage's rows file (JSONL; :func:`nemo_act.engines.nemo_rl.processors.tag_rows`):
the core's rows (its prompts, reward inputs and targets) each tagged with ``task_name`` (its reward
environment: ``act_selection``, ``act_action``; or ``act_sft`` / ``act_dpo``) and ``enable_thinking``.
Only keys NeMo-RL's ``ResponseDatasetConfig`` knows survive its config validation (pydantic drops the
rest), so everything a stage needs is in that file, and the processor (``data.train.processor:
nemo_act``) turns a row into a datum with :mod:`.processors`. DPO rows become NeMo-RL's preference
format (``context`` + two ranked ``completions``) for its own ``preference_preprocessor``.

Importing this module needs NeMo-RL; it registers our processor and reward environments
(:func:`nemo_act.engines.nemo_rl.environments.register`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from datasets import Dataset  # noqa: TID253
from nemo_rl.data.datasets.raw_dataset import RawDataset  # noqa: TID253

from nemo_act.engines.nemo_rl.environments import register  # noqa: TID253
from nemo_act.engines.nemo_rl.processors import DPO_TASK, preference_record  # noqa: TID253


class StageRowsDataset(RawDataset):
    """One stage's tagged rows (GRPO prompts, SFT examples or DPO pairs) for NeMo-RL's loaders.

    Args:
        data_path: The stage's rows file (one JSON object per line, all of one ``task_name``).
        **kwargs: The other ``data.train`` keys (unused; NeMo-RL passes them all).

    Raises:
        ValueError: Naming file, line and field, for an empty file, a row without ``task_name`` or a
            file that mixes stages.
    """

    def __init__(self, data_path: str, **kwargs: Any) -> None:
        register()
        path = Path(data_path)
        rows = []
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "task_name" not in row:
                raise ValueError(f"{path}:{n}: field 'task_name' missing (write rows with processors.tag_rows)")
            rows.append(row)
        if not rows:
            raise ValueError(f"{path}: no rows")
        names = {r["task_name"] for r in rows}
        if len(names) != 1:
            raise ValueError(f"{path}: rows of several stages ({sorted(names)}); one stage per file")
        self.task_name = names.pop()
        if self.task_name == DPO_TASK:
            rows = [preference_record(r) for r in rows]
        self.dataset = Dataset.from_list(rows)
        self.val_dataset = None
