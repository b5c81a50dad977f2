"""The cluster path run the way NeMo-RL's image runs it, on a CPU: the twin lane (``make test-cluster``).

``make test-cluster`` builds the twin (tools/cluster_twin/README.md): Python 3.13, NeMo-RL v0.7.0's default
venv from the release's own ``uv.lock`` (``docker/Dockerfile:183-193``), ``slurm/image_setup.sh`` run on it
as the image build runs it, the user's NeMo-RL source (``NEMO_RL_SOURCE``: a checkout of the pinned tag or a git
archive of it, checked against the pin) on a ``.pth`` (the image's editable install at ``/opt/nemo-rl``); inside
the release image itself (``make test-cluster-image``) the image's own Python and ``/opt/nemo-rl``. Our code on
``PYTHONPATH`` as the job puts it there. The processes below get the job's environment: ``launch.stage_env``
(``interpreters.child_env``: the checkout, ``tools/convert`` and its ``autoregister`` folder) plus the image's own
``ENV`` lines that matter on a CPU (:data:`IMAGE_ENV`), and they attach to a Ray head started with Ray's CLI, as
``slurm/_ray_node.sh`` starts the job's.

What runs for real: NeMo-RL's ``examples/run_grpo.py``, ``run_sft.py`` and ``run_dpo.py`` on configs our
driver prepares, up to NeMo-RL's own GPU-resource error (``virtual_cluster.py:766-789``, retries cut to
one with its ``NRL_VIRTUAL_CLUSTER_MAX_RETRIES``); our reward env actors created by NeMo-RL's
``create_env`` in their own Ray worker processes (``environments/utils.py:107-131``: the caller's whole
environment) and scored through its ``calculate_rewards``; our driver end to end with only the GPU-bound
``setup`` / ``*_train`` stood in (``tests/stand_ins/nemo_rl_training.py`` says what they do and which
lines they follow). Without NeMo-RL (the ``make test`` venv, CI) every test here skips with the reason (the pin
check needs only ``NEMO_RL_SOURCE``); inside the twin lane a missing NeMo-RL fails them (tests/needs_nemo_rl.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest
from every_kind import every_kind_rows
from needs_nemo_rl import import_nemo_rl, named_source, nemo_rl_source

from nemo_act.config import conf_root, load_config
from nemo_act.stage_kinds import STAGE_KINDS, stage_kind

REPO = Path(__file__).resolve().parents[1]
# NeMo-RL v0.7.0 docker/Dockerfile: ENV RAY_USAGE_STATS_ENABLED=0 (101), RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 (105),
# TORCH_CUDA_ARCH_LIST="9.0 10.0" (137; its Megatron policy refuses to start without it, lm_policy.py:121).
# Not NRL_CONTAINER=1 (40): with it NeMo-RL checks the image's /opt/nemo_rl_container_fingerprint and our
# interpreter map points at the image's /opt venvs; the twin's one venv stands for all three.
IMAGE_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "TORCH_CUDA_ARCH_LIST": "9.0 10.0"}
# One recipe per model family: Qwen3 dense (every stage kind), Qwen3 MoE and Olmo-3 (FP8) (one kind per algorithm)
FAMILY = {
    "qwen3": "alfworld/act-qwen3-8b-4n4g-megatron.yaml",
    "qwen3_moe": "scienceworld/act-qwen3-30b-a3b-8n4g-megatron.yaml",
    "olmo3": "webshop/act-olmo3-7b-4n4g-megatron-fp8.yaml",
}
RUNS = [("qwen3", kind) for kind in STAGE_KINDS] + [
    (family, kind) for family in ("qwen3_moe", "olmo3") for kind in ("act", "il", "dpo")
]
SCRIPT = {"grpo": "run_grpo.py", "sft": "run_sft.py", "dpo": "run_dpo.py"}


def test_the_twins_pins_are_nemo_rls_own_lock():
    """tools/cluster_twin/requirements.txt holds the release's uv.lock versions (its export, see export_lock.py)."""
    lock = tomllib.loads(nemo_rl_source.uv_lock(named_source()))
    versions: dict[str, set[str]] = {}
    for package in lock["package"]:
        versions.setdefault(package["name"], set()).add(str(package.get("version")).split("+")[0])
    pins = [
        line.split(" ;")[0].strip()
        for line in (REPO / "tools" / "cluster_twin" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(pins) > 200
    named = dict(pin.split("==") for pin in pins)
    for name, version in named.items():
        assert version in versions.get(name, set()), f"{name}=={version} is not in NeMo-RL v0.7.0's uv.lock"
    for name in ("torch", "ray", "transformers", "omegaconf", "pytest"):  # the image's default venv has them
        assert name in named
    assert named["torch"] == "2.11.0" and named["transformers"] == "5.8.1" and "vllm" not in named


# ---- everything below runs NeMo-RL: the twin only ---------------------------------------------------------


@pytest.fixture(scope="module")
def nemo_rl_dir() -> Path:
    import_nemo_rl()
    from nemo_act.engines.nemo_rl.driver import nemo_rl_root

    return nemo_rl_root()


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports (all bound at once, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="module")
def ray_head(nemo_rl_dir):
    """A Ray head started with Ray's CLI, as slurm/_ray_node.sh starts the job's (no GPUs here, no ``--block``).

    It runs in a process group of its own and is stopped by signalling that group, not by ``ray stop`` (which
    stops every Ray on the machine: under pytest-xdist another worker's cluster too); its own short temp dir
    and ports keep it apart from theirs (Ray's socket paths must stay under 107 characters)."""
    ray = str(Path(sys.executable).parent / "ray")
    port, client, node, objects, env_agent, agent_grpc, agent_http, metrics = _free_ports(8)
    env = {**os.environ, **IMAGE_ENV}
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    # workers and drivers of this cluster take ports from a range of its own (Ray's default range, 10002-19999,
    # is what another worker's ray.init(address="local") uses; Ray hands out ports without asking the OS)
    low = 20000 + 2000 * int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    start = subprocess.Popen(
        [ray, "start", "--head", f"--port={port}", "--num-cpus=8", "--include-dashboard=false",
         "--disable-usage-stats", "--node-ip-address=127.0.0.1", f"--temp-dir={temp}",
         # the ports slurm/_ray_node.sh sets per node (node_ports), each free here: Ray's fixed defaults
         # (client 10001, dashboard agent 52365, ...) would collide with another worker's head
         f"--ray-client-server-port={client}", f"--node-manager-port={node}", f"--object-manager-port={objects}",
         f"--runtime-env-agent-port={env_agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
         f"--dashboard-agent-listen-port={agent_http}", f"--metrics-export-port={metrics}",
         f"--min-worker-port={low}", f"--max-worker-port={low + 1999}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    out, _ = start.communicate(timeout=300)
    assert start.returncode == 0, out[-3000:]
    yield f"127.0.0.1:{port}"
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(start.pid, sig)
        except ProcessLookupError:
            break
        time.sleep(3)


def job_env(out: Path, ray_address: str, **extra: str) -> dict[str, str]:
    """A stage process's environment in the job: launch.stage_env + the image's ENV + the job's Ray."""
    from nemo_act.engines.nemo_rl.launch import stage_env

    env = stage_env(base={**os.environ, **IMAGE_ENV}, out=out)
    return {**env, "RAY_ADDRESS": ray_address, "HF_HUB_OFFLINE": "1", "NRL_VIRTUAL_CLUSTER_MAX_RETRIES": "1", **extra}


@pytest.fixture(scope="module")
def stage_rows(nemo_rl_dir, sw_experts, tmp_path_factory):
    """Each registered stage kind's rows file, its data built as the pipeline builds it (tests/every_kind.py), on
    Python 3.13: a kind added later is covered without editing this file."""
    return every_kind_rows(tmp_path_factory.mktemp("rows"), sw_experts)


def _small_batches(kind: str) -> list[str]:
    """Overrides that let a handful of rows make one optimizer step (the layout stays the recipe's)."""
    spec = stage_kind(kind)
    size = 8 if spec.algorithm == "grpo" else 2  # GRPO: one prompt x G=8; a reflection baseline's 2 rows one step
    return [f"train.{spec.train}.batch_size={size}", f"train.{spec.train}.grad_accum=1"]


def _prepare(kind: str, recipe: Path, rows: Path, init: Path, out: Path, env: dict, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "nemo_act.engines.nemo_rl.driver", "--stage", kind, "--config", str(recipe),
           "--init", str(init), "--rows", str(rows), "--out", str(out), "--prepare-only",
           *_small_batches(kind), *extra]  # fmt: skip
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    import yaml

    return yaml.safe_load((out / "nemo_rl" / "config.yaml").read_text())


@pytest.mark.heavy
@pytest.mark.parametrize(("family", "kind"), RUNS, ids=[f"{f}-{k}" for f, k in RUNS])
def test_nemo_rls_own_example_scripts_reach_the_gpu_boundary(
    family, kind, nemo_rl_dir, ray_head, stage_rows, tiny_model_dir, tmp_path
):
    """examples/run_{grpo,sft,dpo}.py on the prepared config, with the job's environment: config, tokenizer,
    data setup (our dataset class, processor and reward env by name) and Ray all pass, and the run stops at
    NeMo-RL's own GPU-resource error, nothing earlier (DPO crashed on data.default before)."""
    recipe = conf_root() / "recipes" / FAMILY[family]
    out = tmp_path / f"01_{kind}"
    env = job_env(out, ray_head)
    master = _prepare(kind, recipe, stage_rows[kind], tiny_model_dir, out, env)
    assert "default" not in master["data"]
    n_rows = sum(1 for line in stage_rows[kind].read_text().splitlines() if line.strip())
    script = nemo_rl_dir / "examples" / SCRIPT[stage_kind(kind).algorithm]
    res = subprocess.run(
        [sys.executable, str(script), "--config", str(out / "nemo_rl" / "config.yaml")],
        cwd=nemo_rl_dir, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    log = res.stdout + res.stderr
    shape = load_config(recipe).engine.nemo_rl.cluster
    gpus = shape.num_nodes * shape.gpus_per_node
    assert res.returncode != 0
    assert f"Training dataset loaded with {n_rows} samples" in log, log[-4000:]
    assert f"Not enough GPUs available. Requested {gpus} GPUs, but only 0 are available" in log, log[-4000:]
    last_error = [line for line in log.splitlines() if re.match(r"^[\w.]+(Error|Exception): ", line)][-1]
    assert last_error.startswith("nemo_rl.distributed.virtual_cluster.ResourceInsufficientError"), log[-4000:]
    assert "[nemo-act] not registered" not in log


def _driver(kind: str, recipe: Path, rows: Path, init: Path, out: Path, record: Path, *extra: str) -> list[str]:
    """Our driver with NeMo-RL's GPU parts stood in, the stage's last step at the stand-in's 2 (STANDIN_STEPS)."""
    train = stage_kind(kind).train
    return [sys.executable, str(REPO / "tests" / "stand_ins" / "nemo_rl_training.py"), str(record),
            "--stage", kind, "--config", str(recipe), "--init", str(init), "--rows", str(rows), "--out", str(out),
            *_small_batches(kind), f"train.{train}.max_steps=2", "engine.nemo_rl.save_period=1", *extra]  # fmt: skip


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["act", "act_onpolicy", "rl", "il", "dpo"])
def test_our_driver_trains_through_nemo_rls_data_and_reward_actors_with_only_the_gpu_parts_stood_in(
    kind, nemo_rl_dir, ray_head, stage_rows, tiny_model_dir, tmp_path
):
    """Our driver in its own process under the job's environment; NeMo-RL's setup/train stood in (a GPU).

    GRPO kinds: our reward actors, created by NeMo-RL's create_env in Ray worker processes that inherit the
    driver's environment (autoregister hook included: the actor died at its first reward before), score
    real batches through calculate_rewards: right answers get the full reward, malformed ones the format
    penalty, and the per-step log comes back into metrics.jsonl. Every kind: NeMo-RL's deadline save is
    counted from the job's end, the checkpoint and TensorBoard logs are NeMo-RL's own.
    """
    import time

    from nemo_act.engines.nemo_rl.launch import latest_checkpoint

    recipe = conf_root() / "recipes" / FAMILY["qwen3"]
    out = tmp_path / f"01_{kind}"
    end = int(time.time()) + 3 * 3600
    env = job_env(out, ray_head, NEMO_ACT_JOB_END=str(end), STANDIN_STEPS="2")
    record = tmp_path / "record.json"
    cmd = _driver(kind, recipe, stage_rows[kind], tiny_model_dir, out, record)
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert "[nemo-act] not registered" not in res.stderr
    seen = json.loads(record.read_text())
    assert seen["steps"] == 2
    margin = load_config(recipe).engine.nemo_rl.save_deadline_margin_s
    d, h, m, s = (int(x) for x in seen["checkpointing"]["checkpoint_must_save_by"].split(":"))
    assert 0 <= (3 * 3600 - margin) - (d * 86400 + h * 3600 + m * 60 + s) < 300
    assert latest_checkpoint(out / "checkpoints").name == "step_2"
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and metrics[0]["loss"] == 1.0 and metrics[1]["loss"] == 0.5
    if stage_kind(kind).algorithm != "grpo":
        return
    cfg = load_config(recipe)
    values = cfg.rewards.selection if kind == "act" else cfg.rewards.action
    for step in seen["rewards"]:
        right, malformed = step[0::2], step[1::2]
        assert all(r[0] == values.correct for r in right), step
        assert all(r[2] == values.malformed and r[0] == 0.0 for r in malformed), step
    parts = [json.loads(line) for line in (out / "reward_parts.jsonl").read_text().splitlines()]
    assert [p["call"] for p in parts] == [1, 2]
    assert all(abs(m["rewards/format/mean"] - values.malformed / 2) < 1e-6 for m in metrics)


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["act", "il"])
def test_a_stage_stopped_at_the_save_deadline_exits_75_and_the_rerun_resumes_it_to_its_end(
    kind, nemo_rl_dir, ray_head, stage_rows, tiny_model_dir, tmp_path
):
    """Issue 56, with NeMo-RL's own deadline logic (its ``TimeoutChecker`` on ``checkpoint_must_save_by``, in the
    stand-in's loop frame: tests/stand_ins/nemo_rl_training.py): a job that starts the stage with less than the
    margin left gets ``00:00:00:00``, NeMo-RL saves after step 1 and returns normally. Our driver finds ``step_1``
    short of the stage's 2 steps, says so in one line and exits 75 (the launcher then exports nothing: tests/
    test_nemo_rl_recipes.py); run again with time left, NeMo-RL resumes from ``step_1`` and the stage ends at
    ``step_2`` with exit 0, its metrics and reward parts numbered on from the resume."""
    from nemo_act.engines.nemo_rl.launch import STOPPED_EXIT, latest_checkpoint

    recipe = conf_root() / "recipes" / FAMILY["qwen3"]
    out = tmp_path / f"01_{kind}"
    margin = load_config(recipe).engine.nemo_rl.save_deadline_margin_s
    cmd = _driver(kind, recipe, stage_rows[kind], tiny_model_dir, out, tmp_path / "record.json")
    near = job_env(out, ray_head, NEMO_ACT_JOB_END=str(int(time.time()) + margin // 2))
    res = subprocess.run(cmd, cwd=REPO, env=near, capture_output=True, text=True, timeout=600)
    assert res.returncode == STOPPED_EXIT, (res.stdout + res.stderr)[-4000:]
    assert "Timeout has been reached, stopping training early" in res.stdout
    assert f"01_{kind}: stopped at the save deadline after step 1 of 2: requeued, resumes from step_1" in res.stdout
    assert latest_checkpoint(out / "checkpoints").name == "step_1"
    assert json.loads((tmp_path / "record.json").read_text())["steps"] == 1
    later = job_env(out, ray_head, NEMO_ACT_JOB_END=str(int(time.time()) + 3 * 3600))
    res = subprocess.run(cmd, cwd=REPO, env=later, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert json.loads((tmp_path / "record.json").read_text())["steps"] == 1  # only the step left
    assert latest_checkpoint(out / "checkpoints").name == "step_2"
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    if kind == "act":
        parts = [json.loads(line) for line in (out / "reward_parts.jsonl").read_text().splitlines()]
        assert [p["call"] for p in parts] == [1, 2]


def test_the_stage_metrics_leave_out_nemo_rls_gpu_monitor_rows(tmp_path):
    """NeMo-RL's Ray/GPU monitor (``logger.monitor_gpus``) logs ``ray/*`` scalars on its own sample counter
    (``nemo_rl/utils/logger.py:990-1007``), not on training steps: a slow run put its samples at "steps" 0 and
    10 of the stage's metrics.jsonl. The driver's reader keeps them in TensorBoard only."""
    pytest.importorskip("tensorboard", reason="tensorboard is not installed here; the twin lane (image venv) has it")
    from torch.utils.tensorboard import SummaryWriter

    from nemo_act.engines.nemo_rl.driver import _tensorboard_scalars

    writer = SummaryWriter(str(tmp_path / "logs" / "exp_001"))
    for step, loss in ((1, 1.0), (2, 0.5)):
        writer.add_scalar("train/loss", loss, step)
    for sample in (0, 10):
        writer.add_scalar("ray/node.0.mem_gb", 1.5, sample)
        writer.add_scalar("ray/ray/ray_step", float(sample), sample)
    writer.close()
    assert _tensorboard_scalars(tmp_path / "logs") == {1: {"train/loss": 1.0}, 2: {"train/loss": 0.5}}
