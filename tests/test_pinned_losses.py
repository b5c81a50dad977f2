"""Pinned first losses of a tiny local-engine run (torchtune's recipe-test idea): a change to the loss path
(chat template, completion mask, label shift, optimizer, learning-rate schedule, reward wiring) fails here,
not only a benchmark. Everything is built in the test (tiny Qwen3 and BPE tokenizer from our own templates,
three constructed ScienceWorld-style trajectories), so it needs no JVM and no data. Values were measured on
CPU (float32); the tolerance covers summation-order differences between CPUs, not a changed computation.
If a change is meant to move them, rerun with ``-s`` and pin the printed values (say why in the commit)."""

import json

import pytest

from nemo_act import stage_data
from nemo_act.config import load_config
from nemo_act.data import Trajectory
from nemo_act.engines.local.stages import train_stage
from nemo_act.tiny_model import build_tiny_model

PINNED_IL = [6.17990, 5.98660, 5.77131]  # loss at optimizer steps 1-3 (measured 2026-11-30, 1 and 2 threads)


def _trajectories() -> list[Trajectory]:
    rooms = ["kitchen", "hallway", "workshop", "greenhouse"]
    out = []
    for i in range(3):
        steps = [
            {
                "observation": f"You are in the {rooms[(i + j) % 4]}. You see a door to the {rooms[(i + j + 1) % 4]}.",
                "action": f"go to {rooms[(i + j + 1) % 4]}",
                "admissible_actions": [f"go to {r}" for r in rooms] + ["look around", "inventory"],
                "action_admissible": True,
            }
            for j in range(3)
        ]
        out.append(
            Trajectory.model_validate(
                {
                    "trajectory_id": f"scienceworld/walk/{i}", "benchmark": "scienceworld", "task_id": "walk",
                    "variation": i, "split": "train", "task_description": "Your task is to walk to the greenhouse.",
                    "steps": steps, "score": 100.0, "success": True, "source": "test",
                }
            )
        )  # fmt: skip
    return out


def test_il_first_losses_are_pinned(tmp_path):
    cfg = load_config(
        overrides=[
            "train.il.max_steps=3", "train.il.batch_size=3", "train.il.grad_accum=1", "train.il.logging_steps=1",
            "train.il.max_length=2048", "train.il.warmup_ratio=0", "train.il.learning_rate=1e-3",
        ]
    )  # fmt: skip
    model = build_tiny_model(tmp_path / "tiny", cfg.model.tiny)
    rows = stage_data.il_rows(_trajectories(), cfg)
    assert len(rows) == 9
    out = train_stage("il", str(model), rows, cfg, tmp_path / "il")
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [h["loss"] for h in history if "loss" in h]
    print("measured IL losses:", losses)
    assert losses == pytest.approx(PINNED_IL, rel=1e-3)
