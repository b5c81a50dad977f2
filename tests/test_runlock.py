"""One writer per run/data folder (nemo_act/common/runlock.py): refusal naming the holder, take-over of dead holders
(kill -9 on this host, a silent holder on another node, a requeued Slurm job), and two real ``nemo-act run``
processes on one folder."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nemo_act.common.runlock import LOCK_NAME, Holder, LockedError, RunLock, lock_path

FAST = {"heartbeat_s": 0.1, "stale_after_s": 0.6}


def _lock(target, command="test", say=None, **kw):
    return RunLock(target, False, command, **{**FAST, **kw}, say=say)


def _record(folder: Path) -> dict:
    return json.loads((folder / LOCK_NAME).read_text())


def test_lock_files_of_folders_and_files(tmp_path):
    assert lock_path(tmp_path / "run", is_file=False) == tmp_path / "run" / LOCK_NAME
    assert lock_path(tmp_path / "pairs.jsonl", is_file=True) == tmp_path / ".pairs.jsonl.lock"


def test_a_command_that_fails_before_writing_leaves_nothing(tmp_path):
    """A refused or failed command (bad data dir, ...) must not leave a run folder with only a lock in it."""
    with pytest.raises(RuntimeError), _lock(tmp_path / "a" / "run"):
        raise RuntimeError("the benchmark data is missing")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), RunLock(tmp_path / "x.jsonl", True, "t", **FAST):
        raise RuntimeError("no")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), _lock(tmp_path / "run"):  # it wrote something, then failed: all kept
        (tmp_path / "run" / "experts.jsonl.partial").write_text("{}\n")
        raise RuntimeError("killed half-way")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [LOCK_NAME, "experts.jsonl.partial"]


def test_a_second_writer_is_refused_at_once_naming_the_first(tmp_path):
    first = _lock(tmp_path / "run", "nemo-act run a.yaml").acquire()
    try:
        t0 = time.perf_counter()
        with pytest.raises(LockedError) as err:
            _lock(tmp_path / "run", "nemo-act run b.yaml", stale_after_s=60).acquire()
        assert time.perf_counter() - t0 < 10  # no waiting for a heartbeat on a live holder of this host
        msg = str(err.value)
        assert f"pid {os.getpid()} on {socket.gethostname()}" in msg and "nemo-act run a.yaml" in msg
        assert "Wait for it to finish" in msg and str(tmp_path / "run") in msg
    finally:
        first.release()
    said = []
    with _lock(tmp_path / "run", say=said.append):  # released: taken without a word
        assert _record(tmp_path / "run")["released"] is False
    assert said == [] and _record(tmp_path / "run")["released"] is True


def test_the_holder_keeps_a_heartbeat(tmp_path):
    with _lock(tmp_path):
        first = _record(tmp_path)["heartbeat"]
        deadline = time.time() + 10  # a beat every 0.1 s; a loaded machine may delay a few
        while time.time() < deadline and _record(tmp_path)["heartbeat"] == first:
            time.sleep(0.1)
        assert _record(tmp_path)["heartbeat"] > first


def test_a_holder_killed_with_sigkill_is_taken_over_on_this_host(tmp_path):
    code = (
        "import sys, time\nfrom nemo_act.common.runlock import RunLock\n"
        "RunLock(sys.argv[1], False, 'victim', 30, 120).acquire()\nprint('held', flush=True)\ntime.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(LockedError, match="victim"):
        _lock(tmp_path).acquire()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    said = []
    with _lock(tmp_path, say=said.append):
        assert _record(tmp_path)["pid"] == os.getpid()
    assert len(said) == 1 and "is gone" in said[0] and f"pid {proc.pid}" in said[0] and "victim" in said[0]


def _foreign(folder: Path, **kw) -> Holder:
    now = time.time()
    holder = Holder(**{"host": "node-elsewhere", "pid": 4242, "started": now, "command": "nemo-act run x.yaml",
                       "heartbeat": now, **kw})  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOCK_NAME).write_text(json.dumps(holder.__dict__))
    return holder


def test_a_silent_holder_on_another_node_is_taken_over_after_stale_after(tmp_path):
    """A shared filesystem whose flock does not reach across nodes: the record is all there is."""
    _foreign(tmp_path)
    said = []
    t0 = time.perf_counter()
    with _lock(tmp_path, say=said.append):
        waited = time.perf_counter() - t0
    assert FAST["stale_after_s"] <= waited < FAST["stale_after_s"] + 10  # not before its silence was long enough
    assert len(said) == 1 and "stale lock" in said[0] and "node-elsewhere" in said[0] and "4242" in said[0]


def test_a_live_holder_on_another_node_is_refused(tmp_path):
    holder = _foreign(tmp_path)
    stop = threading.Event()

    def beat():  # the other node's heartbeat, written without our flock (it is on another machine)
        while not stop.wait(0.1):
            (tmp_path / LOCK_NAME).write_text(json.dumps({**holder.__dict__, "heartbeat": time.time()}))

    t = threading.Thread(target=beat)
    t.start()
    try:
        with pytest.raises(LockedError, match="heartbeat is live on another node") as err:
            _lock(tmp_path).acquire()
        assert "node-elsewhere" in str(err.value)
    finally:
        stop.set()
        t.join()


def test_a_requeued_slurm_job_takes_its_own_lock_over_at_once(tmp_path, monkeypatch):
    _foreign(tmp_path, slurm_job="777")
    monkeypatch.setenv("SLURM_JOB_ID", "777")
    said = []
    t0 = time.perf_counter()
    with _lock(tmp_path, say=said.append, stale_after_s=60):
        assert time.perf_counter() - t0 < 10  # at once, not after the 60 s a silent holder gets
        assert _record(tmp_path)["slurm_job"] == "777"
    assert len(said) == 1 and "requeued Slurm job 777" in said[0]


def test_a_record_cut_short_by_a_kill_is_no_holder(tmp_path):
    (tmp_path / LOCK_NAME).write_text('{"host": "n1", "pi')
    said = []
    with _lock(tmp_path, say=said.append):
        pass
    assert said == []


@pytest.mark.heavy
@pytest.mark.slow
def test_two_runs_on_one_folder(tiny_model_dir, sw_experts, tmp_path):
    """Two ``nemo-act run`` on one run folder: the second stops at once (non-zero, naming the first) and the first
    finishes unharmed; after the holder is killed with SIGKILL a new run takes the lock and resumes."""
    from nemo_act.config import conf_root

    pipeline = tmp_path / "il.yaml"
    pipeline.write_text(f"defaults:\n  - {conf_root() / 'config.yaml'}\n")
    run = tmp_path / "run"
    overrides = [
        "pipeline.stages=[il]", f"pipeline.init={tiny_model_dir}", f"pipeline.experts.path={sw_experts}",
        "pipeline.eval.stages=none", "train.il.max_steps=8", "train.il.save_steps=2", "train.il.batch_size=2",
        "train.il.grad_accum=1", "train.il.max_length=2048", "train.il.logging_steps=1",
    ]  # fmt: skip
    cmd = [sys.executable, "-m", "nemo_act.cli", "run", str(pipeline), "--run-dir", str(run), *overrides]
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")

    def held_by(proc) -> bool:
        try:
            return _record(run)["pid"] == proc.pid and not _record(run)["released"]
        except (FileNotFoundError, ValueError):
            return False

    def start_and_wait_for_lock():
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None and not held_by(proc):
            time.sleep(0.05)
        assert held_by(proc), proc.communicate()[1][-3000:]
        return proc

    first = start_and_wait_for_lock()
    # -X importtime lists every module the refused process imported: it stops before torch and the trainers (the
    # core's own modules are imported at the CLI's start: they load no heavy dependency, pyproject's TID253),
    # i.e. at start-up, whatever the machine's load (a wall-time bound would measure the load)
    second = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True)
    assert second.returncode == 2, second.stderr[-3000:]
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in second.stderr.splitlines() if line.startswith("import time:")
    }
    assert (
        "nemo_act.common.runlock" in imported
        and not {"torch", "transformers", "trl", "nemo_act.engines.local.stages"} & imported
    )
    said = [line for line in second.stderr.splitlines() if not line.startswith("import time:")]
    assert len(said) == 1 and said[0].startswith("error: ") and "another nemo-act process writes here" in said[0]
    assert f"pid {first.pid} on {socket.gethostname()}" in said[0] and "nemo-act run" in said[0]
    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, err[-3000:]
    log = json.loads((run / "run.json").read_text())
    assert [s["status"] for s in log["stages"]] == ["trained"]
    history = [json.loads(x) for x in (run / "stages" / "01_il" / "metrics.jsonl").read_text().splitlines()]
    assert [h["step"] for h in history if "loss" in h] == list(range(1, 9))  # one writer's rows, each once

    # the holder killed with SIGKILL after a checkpoint: the next run takes the lock over and resumes
    (run / "stages").rename(tmp_path / "done_stages")
    victim = start_and_wait_for_lock()
    ckpts = run / "stages" / "01_il" / "checkpoints"
    deadline = time.time() + 300
    while time.time() < deadline and not any(ckpts.glob("checkpoint-*/trainer_state.json")):
        time.sleep(0.1)
    victim.send_signal(signal.SIGKILL)
    victim.communicate()
    again = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = again.communicate(timeout=900)
    assert again.returncode == 0, err[-3000:]
    assert f"taking over from a process that is gone (pid {victim.pid}" in err
    assert json.loads((run / "run.json").read_text())["stages"][0]["status"] == "resumed"
    assert _record(run)["pid"] == again.pid and _record(run)["released"]


def test_a_failed_invocation_is_in_the_run_history(tmp_path):
    """run.json's history (from invocations.jsonl) keeps an invocation that failed, with its error."""
    from nemo_act.config import load_config
    from nemo_act.data.io import RecordError
    from nemo_act.run.pipeline import PipelineRunner

    bad = tmp_path / "experts.jsonl"
    bad.write_text('{"trajectory_id": "x"}\n')
    cfg = load_config(overrides=["pipeline.init=random", f"pipeline.experts.path={bad}", "pipeline.stages=[il]"])
    runner = PipelineRunner(cfg, tmp_path / "run")
    with pytest.raises((RecordError, ValueError)):
        runner.run()
    (only,) = runner.history()
    assert only["outcome"].startswith("failed: ") and "experts.jsonl" in only["outcome"] and only["ended"]
