"""A local-engine stage killed (SIGKILL) at each of its checkpoints and resumed ends where the run never killed
ends: the same weights, byte for byte, and the same logged metrics (issue 35).

The model is a tiny Qwen3 warmed by a short IL run, so GRPO's groups score differently and every stage moves the
weights (an untrained model's equal rewards would leave GRPO's weights untouched and make the test unable to fail).
Six rows and an 11-step stage saving every 4 steps: GRPO sees 3-step epochs (2 prompts x 2 generations per step),
SFT and DPO 2-step epochs, so the resumes land inside and across epochs, where TRL's own sampler replayed epoch 0's
order (:mod:`nemo_act.engines.local.exact_resume`), and the last one (checkpoint 11) is not the end of an epoch, where
transformers' loop took a twelfth step (issue 45). The process kills itself with SIGKILL at the chosen point
(``tests/stage_process.py``): after checkpoint 4, 8 and 11 is whole, and halfway through writing the final weights.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_act.config import load_config
from nemo_act.data import Pair, Trajectory, read_jsonl
from nemo_act.generation import RandomGenerator
from nemo_act.kinds.act import act_rows
from nemo_act.kinds.controls import dpo_rows
from nemo_act.kinds.imitation import il_rows, rl_rows
from nemo_act.stage_data import stage_experiment
from nemo_act.steps.pairs import collect_pairs

pytestmark = [pytest.mark.heavy, pytest.mark.slow]

STAGE_PROCESS = Path(__file__).with_name("stage_process.py")
TIMING = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "step_time"}  # wall-clock figures


def overrides(kind: str) -> list[str]:
    o = [
        f"train.{kind}.max_steps=11",
        f"train.{kind}.save_steps=4",
        f"train.{kind}.batch_size=4",
        f"train.{kind}.grad_accum=1",
        f"train.{kind}.logging_steps=3",  # not a divisor of save_steps: a resume starts between two logs
        f"train.{kind}.learning_rate=0.0003",
        f"train.{kind}.max_samples=6",
        "benchmark.max_admissible_shown=8",
    ]
    if kind in ("act", "rl"):
        return o + [f"train.{kind}.num_generations=2", f"train.{kind}.max_completion_length=8"]
    return o + [f"train.{kind}.max_length=4096"]


def _rows(kind: str, sw_experts: Path, folder: Path) -> list[dict]:
    cfg = stage_experiment(kind, load_config(overrides=overrides(kind)))
    if kind in ("il", "rl"):
        trajs = list(read_jsonl(sw_experts, Trajectory))
        return (il_rows if kind == "il" else rl_rows)(trajs, cfg)
    collect_pairs(sw_experts, RandomGenerator(), cfg, folder / "pairs.jsonl", k=2, progress=False)
    pairs = list(read_jsonl(folder / "pairs.jsonl", Pair))
    return (act_rows if kind == "act" else dpo_rows)(pairs, cfg)


def _train(job: Path, **kill: int | bool) -> str | None:
    """Run the stage in its own process; ``kill_after=N`` or ``kill_writing_weights=True`` make it SIGKILL itself."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    spec = json.loads(job.read_text())
    job.write_text(json.dumps(dict({k: v for k, v in spec.items() if not k.startswith("kill")}, **kill)))
    res = subprocess.run([sys.executable, str(STAGE_PROCESS), str(job)], env=env, capture_output=True, text=True)
    if not kill:
        assert res.returncode == 0, res.stderr[-3000:]
        return res.stdout.split()[-1]
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    out = Path(spec["out"])
    assert not (out / "metrics.jsonl").exists(), "the kill must land before the stage has finished"
    if "kill_after" in kill:
        assert (out / "checkpoints" / f"checkpoint-{kill['kill_after']}" / "trainer_state.json").exists()
    return None


def _metrics(out: Path) -> list[dict]:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


# RL is ACT's trainer (TRL's GRPOTrainer, the same checkpoints and sampler replay) with another reward and rows
RL_REPEATS_ACT = pytest.mark.repeat(
    "tests/test_exact_resume.py::test_a_stage_killed_at_each_checkpoint_resumes_to_the_uninterrupted_weights[act]"
)


@pytest.mark.parametrize("kind", ["act", pytest.param("rl", marks=RL_REPEATS_ACT), "dpo", "il"])
def test_a_stage_killed_at_each_checkpoint_resumes_to_the_uninterrupted_weights(
    kind, warm_tiny_model, sw_experts, tmp_path
):
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps(_rows(kind, sw_experts, tmp_path)))

    def job(name: str) -> Path:
        path = tmp_path / f"{name}.json"
        spec = {"kind": kind, "init": str(warm_tiny_model), "rows": str(rows), "out": str(tmp_path / name)}
        path.write_text(json.dumps(dict(spec, overrides=overrides(kind))))
        return path

    straight = _train(job("straight"))
    killed = job("killed")
    _train(killed, kill_after=4)
    _train(killed, kill_after=8)  # resumed from 4, killed again at 8
    _train(killed, kill_after=11)  # resumed from 8, killed once the final checkpoint is whole
    _train(killed, kill_writing_weights=True)  # resumed from 11, killed writing the stage's weights
    resumed = _train(killed)  # resumed from 11 again: nothing left to train, the weights handed over
    warm = hashlib.sha256((warm_tiny_model / "model.safetensors").read_bytes()).hexdigest()
    assert straight != warm, "the stage must move the weights, or equal weights prove nothing"
    assert resumed == straight
    straight_m, resumed_m = _metrics(tmp_path / "straight"), _metrics(tmp_path / "killed")
    assert [m["step"] for m in straight_m] == [3, 6, 9, 11]
    assert resumed_m == straight_m  # loss, rewards, num_tokens per log; train_loss over the whole run
