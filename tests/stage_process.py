"""One local-engine stage trained in a process of its own, so a test can SIGKILL it: ``python stage_process.py JOB``.

JOB is a JSON file: ``kind``, ``init`` (an HF folder), ``rows`` (a JSON file of the stage's rows), ``out`` and
``overrides`` (config overrides). It prints the sha256 of the saved ``model.safetensors``.
"""

import hashlib
import json
import sys
from pathlib import Path

from nemo_act.config import load_config
from nemo_act.engines.local.stages import train_stage

if __name__ == "__main__":
    job = json.loads(Path(sys.argv[1]).read_text())
    cfg = load_config(overrides=job["overrides"])
    rows = json.loads(Path(job["rows"]).read_text())
    out = train_stage(job["kind"], job["init"], rows, cfg, job["out"])
    print(hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest())
