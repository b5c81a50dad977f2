"""docs/extending.md, followed as written by a user outside the checkout: its code blocks are copied out of
the page into the layout it gives (a benchmark package, a stage-kind package and a config folder holding only
those files), the Python is linted with the project's rules, and its shell blocks run as one script with the
nemo-act of a wheel installed in a fresh venv (the ``installed_wheel`` fixture) from a folder that is not the
checkout: the tiny model, experts, pairs, an evaluation, a pipeline with the new stage kind and the report.
Nothing of nemo-act is changed or copied."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.heavy  # a wheel, a pipeline run in processes

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "extending.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(), flags=re.S)


# where each block goes: the page's layout block lists these paths, in this order of appearance of the blocks
FILES = {
    "mybench/corridor.py": ("python", 0),
    "myconf/benchmark/corridor.yaml": ("yaml", 0),
    "myconf/benchmark/preamble.corridor.txt": ("text", 1),
    "mystages/mystages.py": ("python", 1),
    "myconf/pipeline/alt_il.yaml": ("yaml", 1),
    "myengines/frugal.py": ("python", 2),
    "myconf/engine/frugal.yaml": ("yaml", 2),
}


def _env(venv: Path) -> dict[str, str]:
    """A user's shell: the venv's nemo-act first on PATH, none of this checkout's settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEMO_ACT_CONF", "VIRTUAL_ENV")}
    return env | {"PATH": f"{venv / 'bin'}:{env['PATH']}", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def project(installed_wheel, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("myproject")
    layout = _blocks("text")[0]
    for path, (lang, index) in FILES.items():
        assert path in layout, f"docs/extending.md's layout block does not list {path}"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(_blocks(lang)[index])
    script = "set -euo pipefail\n" + "\n".join(_blocks("bash"))
    res = subprocess.run(["bash", "-c", script], cwd=root, env=_env(installed_wheel), capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-4000:]
    return {"root": root, "venv": installed_wheel, "out": res.stdout, "err": res.stderr}


def test_the_guide_s_files_pass_the_project_s_lint(project):
    files = [str(project["root"] / p) for p in FILES if p.endswith(".py")]
    config = str(REPO / "pyproject.toml")
    for cmd in (["check"], ["format", "--check"]):
        res = subprocess.run([sys.executable, "-m", "ruff", *cmd, "--config", config, *files], capture_output=True,
                             text=True)  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr


def test_the_config_folder_holds_only_the_user_s_files(project):
    mine = sorted(str(p.relative_to(project["root"] / "myconf")) for p in (project["root"] / "myconf").rglob("*.*"))
    assert mine == [
        "benchmark/corridor.yaml", "benchmark/preamble.corridor.txt", "engine/frugal.yaml", "pipeline/alt_il.yaml"
    ]  # fmt: skip
    where = subprocess.run([str(project["venv"] / "bin" / "python"), "-c", "import nemo_act; print(nemo_act.__file__)"],
                           cwd=project["root"], capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert str(project["venv"]) in where and str(REPO) not in where


def test_experts_pairs_and_evaluation_ran_on_the_new_benchmark(project):
    root = project["root"]
    experts = [json.loads(line) for line in (root / "data" / "experts.jsonl").read_text().splitlines()]
    assert len(experts) == 6 and all(t["success"] and t["benchmark"] == "corridor" for t in experts)
    assert [len(t["steps"]) for t in experts] == [4, 3, 2, 1, 4, 3]  # start room = variation mod 4
    assert "6/6 episodes won, 17 expert steps" in project["out"]
    assert "handcoded-expert" not in project["out"]  # no other benchmark's wording
    pairs = [json.loads(line) for line in (root / "data" / "pairs.jsonl").read_text().splitlines()]
    assert pairs and {p["benchmark"] for p in pairs} == {"corridor"}
    summary = json.loads((root / "eval" / "random" / "summary.json").read_text())
    assert summary["benchmark"] == "corridor" and summary["benchmark_title"] == "Corridor"
    assert summary["episodes"] == 4


def test_the_pipeline_trained_the_registered_stage_kinds_and_the_report_is_quiet(project):
    run = project["root"] / "runs" / "alt_il"
    log = json.loads((run / "run.json").read_text())
    assert [s["stage"] for s in log["stages"]] == ["01_sft_alternative", "02_il", "03_rl_verb"]
    for s in log["stages"]:  # trained, on the stage's own rows, handing over an HF checkpoint
        stage = project["root"] / s["path"]
        assert s["status"] == "trained" and (stage / "config.json").is_file()
        metrics = [json.loads(line) for line in (stage / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in metrics if "loss" in m] == [1, 2]  # train=smoke: two steps
        assert {m["stage"] for m in metrics if "loss" in m} == {s["stage"][3:]}
    grpo = [json.loads(line) for line in (run / "stages" / "03_rl_verb" / "metrics.jsonl").read_text().splitlines()]
    assert all("rewards/accuracy/mean" in m and "rewards/expert_match/mean" in m for m in grpo if "loss" in m)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["extensions"] == ["mystages"] and cfg["pipeline"]["pairs_policy"] == "random"
    assert log["eval"]["03_rl_verb"]["benchmark"] == "corridor"  # the final checkpoint, evaluated in the corridor env
    report = (project["root"] / "runs" / "report" / "report.md").read_text()
    assert "| alt_il |" in report and "Corridor test score" in report
    assert "paper" not in project["err"].lower() and "UserWarning" not in project["err"]  # no empty paper table


def test_the_registered_reward_scores_the_same_on_both_engines(project):
    """The local engine's TRL reward functions and NeMo-RL's reward environment (the engine-free core of the
    generic actor, as NeMo-RL builds it from the env config the recipe writes) score the same fields alike."""
    code = """
import json
from nemo_act.config import load_config
from nemo_act.engines.local.reward_funcs import reward_funcs
from nemo_act.engines.nemo_rl.recipe import master_config
from nemo_act.engines.nemo_rl.reward_env import ScoredRewardEnv
cfg = load_config("pipeline/alt_il.yaml", ["benchmark=corridor", "engine=nemo_rl", "generation=vllm", "train=cluster"])
m = master_config("rl_verb", cfg, {}, init="/ckpt", out="/runs/x", n_rows=1000)
env_cfg = m["env"]["reward_same_verb"]
answers = ["<action>go east</action>", "<action>go west</action>", "<action>look</action>", "oops"]
row = {"expert_action": "go east", "admissible_actions": ["go east", "go west", "look"]}
env = ScoredRewardEnv(env_cfg["reward"], env_cfg["values"], env_cfg["use_admissible"], extensions=env_cfg["extensions"])
step = env.step([[{"role": "assistant", "content": a}] for a in answers], [row] * 4)
funcs, _ = reward_funcs("same_verb", cfg)
local = [f([None] * 4, [[{"role": "assistant", "content": a}] for a in answers], expert_action=["go east"] * 4,
           admissible_actions=[row["admissible_actions"]] * 4) for f in funcs[:3]]
print(json.dumps({"env_name": m["data"]["train"]["env_name"], "nemo_rl": step.rewards.tolist(),
                  "local": [list(r) for r in zip(*local)], "sft": "sft" in m, "grpo": "grpo" in m}))
"""
    env = _env(project["venv"]) | {"PYTHONPATH": f"{project['root'] / 'mybench'}:{project['root'] / 'mystages'}",
                                    "NEMO_ACT_CONF": str(project["root"] / "myconf")}  # fmt: skip
    res = subprocess.run([str(project["venv"] / "bin" / "python"), "-c", code], cwd=project["root"], env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.splitlines()[-1])
    assert got["env_name"] == "reward_same_verb" and got["grpo"] and not got["sft"]
    expected = [
        [1.0, 0.0, 0.0],
        [0.0, 0.1, 0.0],
        [0.0, 0.0, 0.0],
        [0.0, 0.0, -0.5],
    ]  # expert, same verb, other, malformed
    for engine in ("nemo_rl", "local"):
        assert [pytest.approx(r) for r in expected] == got[engine], engine


def test_the_preamble_beside_the_yaml_starts_every_prompt(project):
    preamble = _blocks("text")[1].strip()
    shown = project["out"].split("=== ACT selection prompt ===")[1]
    prompts = [p.strip() for p in re.split(r"=== .* ===", shown) if p.strip()]
    assert len(prompts) == 2 and all(p.startswith(preamble) for p in prompts), prompts


def test_the_new_stage_kind_maps_to_nemo_rl_sft(project):
    code = (
        "import json; from nemo_act.config import load_config;"
        "from nemo_act.engines.nemo_rl.recipe import master_config;"
        "from nemo_act.engines.nemo_rl.processors import task_name;"
        "cfg = load_config('pipeline/alt_il.yaml', ['benchmark=corridor', 'engine=nemo_rl', 'generation=vllm',"
        " 'train=cluster']);"
        "m = master_config('sft_alternative', cfg, {}, init='/ckpt', out='/runs/x', n_rows=1000);"
        "print(json.dumps({'sft': 'sft' in m, 'grpo': 'grpo' in m, 'task': task_name('sft_alternative')}))"
    )
    env = _env(project["venv"]) | {"PYTHONPATH": f"{project['root'] / 'mybench'}:{project['root'] / 'mystages'}",
                                    "NEMO_ACT_CONF": str(project["root"] / "myconf")}  # fmt: skip
    res = subprocess.run([str(project["venv"] / "bin" / "python"), "-c", code], cwd=project["root"], env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.splitlines()[-1]) == {"sft": True, "grpo": False, "task": "act_sft"}


def test_a_module_missing_part_of_the_protocol_is_refused_with_what_is_missing(project, tmp_path):
    broken = (project["root"] / "mybench" / "corridor.py").read_text().replace("def expert_env(", "def _expert_env(")
    (tmp_path / "corridor.py").write_text(broken)
    env = _env(project["venv"]) | {"PYTHONPATH": str(tmp_path), "NEMO_ACT_CONF": str(project["root"] / "myconf")}
    res = subprocess.run(["nemo-act", "config", "--benchmark", "corridor"], cwd=tmp_path, env=env, capture_output=True,
                         text=True)  # fmt: skip
    assert res.returncode != 0
    assert "expert data: LiveExperts (expert_env (missing))" in res.stderr, res.stderr[-2000:]


def test_an_engine_of_the_user_s_trains_a_stage_with_its_own_settings(project):
    """An engine added from outside the package (the guide's ``myengines.frugal``) runs a pipeline stage: the stage
    is trained by it (its note in the stage folder, its own block's cap of 1 step instead of train=smoke's 2), handed
    over as an HF checkpoint and evaluated; ``nemo-act ls`` lists it with its module; its block is checked."""
    run = project["root"] / "runs" / "frugal"
    log = json.loads((run / "run.json").read_text())
    assert [s["stage"] for s in log["stages"]] == ["01_il"]
    stage = project["root"] / log["stages"][0]["path"]
    assert json.loads((stage / "frugal.json").read_text())["max_steps"] == 1 and (stage / "config.json").is_file()
    metrics = [json.loads(line) for line in (stage / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "loss" in m] == [1]
    assert yaml.safe_load((run / "config.yaml").read_text())["engine"] == {"name": "myengines.frugal", "max_steps": 1}
    assert log["eval"]["01_il"]["benchmark"] == "corridor"
    listed = [line for line in project["out"].splitlines() if "myengines.frugal" in line]
    assert listed, project["out"][-3000:]  # the ls table lists it by its module
    env = _env(project["venv"]) | {"PYTHONPATH": f"{project['root']}:{project['root'] / 'mybench'}",
                                    "NEMO_ACT_CONF": str(project["root"] / "myconf")}  # fmt: skip
    res = subprocess.run(["nemo-act", "config", "engine=frugal", "engine.max_stepz=1"], cwd=project["root"], env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode != 0 and "engine.max_stepz" in res.stderr, res.stderr[-2000:]
