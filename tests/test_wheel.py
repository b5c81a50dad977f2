"""The package installs anywhere: the wheel carries conf/, the prompt templates and the converters, and
`nemo-act` finds its defaults without a checkout.

The wheel is the ``installed_wheel`` fixture's (tests/conftest.py: built from this checkout, installed into a
fresh venv that sees the test venv's third-party packages but not this checkout); every command runs from
another directory."""

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # the whole module: see tests/conftest.py for what heavy means

REPO = Path(__file__).resolve().parents[1]


def _trajectory(i: int) -> dict:
    rooms = ["kitchen", "hallway", "workshop"]
    return {
        "trajectory_id": f"scienceworld/walk/{i}", "benchmark": "scienceworld", "task_id": "walk", "variation": i,
        "split": "train", "task_description": "Your task is to walk to the workshop.", "score": 100.0,
        "success": True, "source": "test",
        "steps": [
            {"observation": f"You are in the {r}.", "action": f"go to {rooms[(j + 1) % 3]}",
             "admissible_actions": [f"go to {x}" for x in rooms] + ["look around"], "action_admissible": True}
            for j, r in enumerate(rooms)
        ],
    }  # fmt: skip


@pytest.fixture(scope="module")
def installed(installed_wheel) -> Path:
    return installed_wheel


def _run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEMO_ACT_CONF")}
    return subprocess.run([str(venv / "bin" / "nemo-act"), *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_installed_package_reads_its_own_defaults(installed, tmp_path):
    code = "import nemo_act, nemo_act.config as c; print(nemo_act.__file__, c.conf_root())"
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert str(installed) in where[0] and str(REPO) not in where[0]
    assert where[1].startswith(str(installed)) and where[1].endswith("nemo_act/conf")
    res = _run(installed, "config", "benchmark=alfworld", "pairs.k=3", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "name: alfworld" in res.stdout and "k: 3" in res.stdout
    recipe = Path(where[1]) / "recipes" / "alfworld" / "act-qwen3-8b-4n4g-megatron.yaml"  # its defaults resolve there
    plan = _run(installed, "plan", str(recipe), cwd=tmp_path)
    assert plan.returncode == 0 and "layout ok" in plan.stdout, plan.stdout + plan.stderr
    converters = Path(where[1]).parent / "convert_tools"
    assert (converters / "megatron_to_hf.py").is_file() and (converters / "autoregister" / "sitecustomize.py").is_file()


def test_pairs_with_the_random_policy_from_another_directory(installed, tmp_path):
    experts = tmp_path / "experts.jsonl"
    experts.write_text("".join(json.dumps(_trajectory(i)) + "\n" for i in range(2)))
    work = tmp_path / "elsewhere"
    work.mkdir()
    res = _run(
        installed,
        "pairs",
        "--experts",
        str(experts),
        "--policy",
        "random",
        "--k",
        "2",
        "--out",
        "pairs.jsonl",
        cwd=work,
    )
    assert res.returncode == 0, res.stderr
    assert "pairs from 6 states" in res.stdout
    pairs = [json.loads(line) for line in (work / "pairs.jsonl").read_text().splitlines()]
    assert pairs and all(p["expert_action"] in p["candidates"] for p in pairs)
    assert (work / "pairs.jsonl.manifest.json").is_file()
