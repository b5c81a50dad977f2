"""docs/extending.md is followed as written: its corridor module and YAML are copied out of the page into a
temporary package and config folder, and nemo-act collects experts, builds pairs, evaluates a policy and
replays a state on it, with no change to nemo-act itself."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nemo_act.paths import conf_root

REPO = Path(__file__).resolve().parents[1]


def _blocks(lang: str) -> list[str]:
    text = (REPO / "docs" / "extending.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


@pytest.fixture(scope="module")
def corridor(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("ext")
    (root / "mybench").mkdir()
    (root / "mybench" / "corridor.py").write_text(_blocks("python")[0])
    shutil.copytree(conf_root(), root / "myconf")
    (root / "myconf" / "benchmark" / "corridor.yaml").write_text(_blocks("yaml")[0])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PYTHONPATH": str(root / "mybench"), "NEMO_ACT_CONF": str(root / "myconf"), "OMP_NUM_THREADS": "1"}
    return {"root": str(root), **{f"env:{k}": v for k, v in env.items()}}


def _run(corridor, *args: str) -> subprocess.CompletedProcess:
    env = {k[4:]: v for k, v in corridor.items() if k.startswith("env:")}
    res = subprocess.run([sys.executable, "-m", "nemo_act.cli", *args], cwd=corridor["root"], env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return res


def test_the_guide_s_benchmark_runs_experts_pairs_and_evaluation(corridor):
    root = Path(corridor["root"])
    _run(corridor, "experts", "--benchmark", "corridor", "--split", "train", "--out", "data/experts.jsonl")
    experts = [json.loads(line) for line in (root / "data" / "experts.jsonl").read_text().splitlines()]
    assert len(experts) == 6 and all(t["success"] and t["benchmark"] == "corridor" for t in experts)
    assert [len(t["steps"]) for t in experts] == [4, 3, 2, 1, 4, 3]  # start room = variation mod 4
    res = _run(corridor, "pairs", "--experts", "data/experts.jsonl", "--policy", "random", "--k", "2",
               "--out", "data/pairs.jsonl", "benchmark=corridor")  # fmt: skip
    assert "pairs from 17 states" in res.stdout
    _run(corridor, "eval", "--benchmark", "corridor", "--policy", "random", "--split", "test", "--out", "eval/random",
         "--workers", "1", "--envs-per-worker", "2", "--seeds", "0")  # fmt: skip
    summary = json.loads((root / "eval" / "random" / "summary.json").read_text())
    assert summary["benchmark"] == "corridor" and summary["benchmark_title"] == "Corridor"
    assert summary["episodes"] == 4


def test_a_recorded_state_is_restored_by_replaying_its_prefix(corridor):
    sys.path.insert(0, str(Path(corridor["root"]) / "mybench"))
    try:
        import corridor as mod
    finally:
        sys.path.pop(0)
    from nemo_act.benchmarks.base import DivergenceError, restore
    from nemo_act.data import Trajectory, read_jsonl

    traj = next(iter(read_jsonl(Path(corridor["root"]) / "data" / "experts.jsonl", Trajectory)))
    cfg = mod.CONFIG.model_validate(yaml.safe_load(_blocks("yaml")[0]))
    env = mod.CorridorEnv(cfg)
    obs = restore(env, traj, 2)
    assert obs.observation == traj.steps[2].observation
    moved = traj.steps[1].model_copy(update={"observation": "You are in room 9."})
    bad = traj.model_copy(update={"steps": [traj.steps[0], moved]})
    with pytest.raises(DivergenceError, match=r"corridor/reach/0: after 1 replayed action\(s\) the env shows"):
        restore(env, bad, 1)
