"""One local-engine stage trained in a process of its own, so a test can SIGKILL it: ``python stage_process.py JOB``.

JOB is a JSON file: ``kind``, ``init`` (an HF folder), ``rows`` (a JSON file of the stage's rows), ``out`` and
``overrides`` (config overrides). It prints the sha256 of the saved ``model.safetensors``.

With ``kill_after`` (a step) in JOB the process SIGKILLs itself once that step's checkpoint is whole; with
``kill_writing_weights`` it SIGKILLs itself halfway through writing the stage's ``model.safetensors`` (the file cut
to half its bytes, as a kill during the write leaves it). A real SIGKILL at a point the test chooses: a kill timed
from outside could land after the stage has finished.
"""

import hashlib
import json
import os
import signal
import sys
from pathlib import Path

from nemo_act.config import load_config
from nemo_act.engines.local import exact_resume
from nemo_act.engines.local.stages import train_stage


def _kill_after_checkpoint(step: int) -> None:
    save = exact_resume.ExactResume._save_checkpoint

    def save_then_die(self, model, trial):
        save(self, model, trial)
        if self.state.global_step == step:
            os.kill(os.getpid(), signal.SIGKILL)

    exact_resume.ExactResume._save_checkpoint = save_then_die


def _kill_writing_weights() -> None:
    train = exact_resume.ExactResume.train

    def train_then_die_saving(self, *args, **kwargs):
        out = train(self, *args, **kwargs)
        save_model = self.save_model

        def half_then_die(output_dir=None, *a, **k):
            save_model(output_dir, *a, **k)
            weights = Path(output_dir) / "model.safetensors"
            data = weights.read_bytes()
            weights.write_bytes(data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)

        self.save_model = half_then_die
        return out

    exact_resume.ExactResume.train = train_then_die_saving


if __name__ == "__main__":
    job = json.loads(Path(sys.argv[1]).read_text())
    if job.get("kill_after"):
        _kill_after_checkpoint(job["kill_after"])
    if job.get("kill_writing_weights"):
        _kill_writing_weights()
    cfg = load_config(overrides=job["overrides"])
    rows = json.loads(Path(job["rows"]).read_text())
    out = train_stage(job["kind"], job["init"], rows, cfg, job["out"])
    print(hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest())
