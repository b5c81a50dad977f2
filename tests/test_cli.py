"""The `nemo-act` command line, run as a user runs it (a real subprocess)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import default_sigint

from nemo_act.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.heavy  # the whole module: see tests/conftest.py for what heavy means

COMMANDS = ["config", "tiny-model", "experts", "pairs", "show", "train", "eval", "run", "convert", "demo"]


def _run(*args, check=False):
    return subprocess.run([sys.executable, "-m", "nemo_act.cli", *args], capture_output=True, text=True, check=check)


def test_every_subcommand_has_help():
    top = _run("--help", check=True).stdout
    for cmd in COMMANDS:
        assert cmd in top
        assert "usage: nemo-act " + cmd in _run(cmd, "--help", check=True).stdout


def test_config_prints_the_resolved_config_with_overrides(capsys):
    assert main(["config", "pairs.k=7", "benchmark=alfworld"]) == 0
    out = capsys.readouterr().out
    assert "k: 7" in out and "name: alfworld" in out


def test_every_subcommand_chooses_the_benchmark_the_same_way(capsys):
    """``--benchmark NAME`` is ``benchmark=NAME`` in every subcommand that reads a config (experts and eval took only
    the option, pairs and run only the override; report reads each run's own); both naming two benchmarks is an
    error, not a silent choice."""
    subcommands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for cmd in ("config", "experts", "pairs", "reflection", "show", "train", "eval", "run", "plan", "checklist"):
        assert "--benchmark {" in subcommands[cmd].format_help(), cmd
    assert main(["config", "--benchmark", "traces"]) == 0
    by_option = capsys.readouterr().out
    assert main(["config", "benchmark=traces"]) == 0
    assert capsys.readouterr().out == by_option and "name: traces" in by_option
    assert main(["config", "--benchmark", "traces", "benchmark=alfworld"]) == 2
    assert "--benchmark traces and benchmark=alfworld name two benchmarks" in capsys.readouterr().err


def test_bad_override_is_a_clear_error_with_exit_2():
    res = _run("config", "pairs.kk=1")
    assert res.returncode == 2 and "field 'pairs.kk': unknown key" in res.stderr and "Traceback" not in res.stderr


def test_malformed_experts_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "experts.jsonl"
    bad.write_text('{"trajectory_id": "x"}\n')
    res = _run("pairs", "--experts", str(bad), "--policy", "random", "--out", str(tmp_path / "p.jsonl"))
    assert res.returncode == 2 and f"{bad}:1: field 'benchmark'" in res.stderr


def test_experts_without_benchmark_data_say_where_to_point(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ALFWORLD_DATA", "WEBSHOP_DATA")}

    def experts(benchmark: str, split: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "nemo_act.cli", "experts", "--benchmark", benchmark, "--split", split]
        return subprocess.run([*cmd, "--out", "x"], capture_output=True, text=True, env=env, cwd=tmp_path)

    res = experts("alfworld", "train")
    assert res.returncode == 2 and "set benchmark.data_dir (or ALFWORLD_DATA)" in res.stderr
    assert "Traceback" not in res.stderr and list(tmp_path.iterdir()) == []  # nothing half-written
    res = experts("webshop", "human")
    assert res.returncode == 2 and "pass --data-dir" in res.stderr


def test_missing_required_arguments_are_named():
    res = _run("train")
    assert res.returncode == 2 and "--stage" in res.stderr and "--data" in res.stderr


def test_gold_policy_needs_experts(tmp_path):
    res = _run("eval", "--policy", "gold", "--out", str(tmp_path))
    assert res.returncode == 2 and "--experts" in res.stderr and "Traceback" not in res.stderr


def test_train_on_the_cluster_engine_dry_run_prints_driver_and_export(sw_experts, tmp_path):
    """NEMO_ACT_DRY_RUN=1: what a GPU node would run (NeMo-RL driver, then the Megatron -> HF export)."""
    recipe = "conf/recipes/scienceworld/act-qwen3-8b-4n4g-megatron.yaml"
    args = ["train", "--stage", "il", "--data", str(sw_experts), "--out", str(tmp_path / "il"), "--config", recipe]
    res = subprocess.run(
        [sys.executable, "-m", "nemo_act.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NEMO_ACT_DRY_RUN": "1"},
    )
    assert res.returncode == 0, res.stderr
    assert "-m nemo_act.engines.nemo_rl.driver --stage il --init Qwen/Qwen3-8B" in res.stdout
    assert "megatron_to_hf.py" in res.stdout and (tmp_path / "il" / "rows.jsonl").stat().st_size > 0


def test_stray_option_is_rejected():
    res = _run("config", "--bogus")
    assert res.returncode == 2 and "unrecognized arguments: --bogus" in res.stderr


def test_parser_requires_a_subcommand():
    with pytest.raises(SystemExit):
        build_parser().parse_args([])


def test_experts_pairs_show_from_the_command_line(scienceworld, tmp_path):
    experts = tmp_path / "experts.jsonl"
    res = _run(
        "experts",
        "--benchmark",
        "scienceworld",
        "--split",
        "dev",
        "--tasks",
        "lifespan-shortest-lived",
        "--max-variations",
        "1",
        "--out",
        str(experts),
    )
    assert res.returncode == 0, res.stderr
    assert "1/1 episodes won" in res.stdout
    pairs = tmp_path / "pairs.jsonl"
    res = _run("pairs", "--experts", str(experts), "--policy", "random", "--k", "2", "--out", str(pairs))
    assert res.returncode == 0, res.stderr
    assert "pairs from" in res.stdout and pairs.exists()
    res = _run("show", "--pairs", str(pairs), "--index", "0")
    assert res.returncode == 0 and "Candidate Actions for the NEXT step:" in res.stdout


def test_convert_dispatches_to_the_tools_with_their_own_arguments():
    res = _run("convert", "hf-to-megatron", "--help")
    assert res.returncode == 0 and "--tp" in res.stdout and "--pp" in res.stdout and "--no-verify" in res.stdout
    bad = _run("convert", "weights-to-onnx")
    assert bad.returncode == 2 and "hf-to-megatron,megatron-to-hf,verify" in bad.stdout


def test_convert_takes_the_megatron_venv_only_once_make_has_finished_it(tmp_path, monkeypatch):
    """A `.venv-megatron` still being built (CI builds it while `make test` runs) has no torch yet: the
    converters run with the fallback interpreter until the venv's `make` stamp exists, then with the venv."""
    import nemo_act.common.paths
    from nemo_act.cli import cmd_convert

    (tmp_path / ".venv-megatron" / "bin").mkdir(parents=True)
    (tmp_path / ".venv-megatron" / "bin" / "python").touch()
    tools = nemo_act.common.paths.convert_root()
    monkeypatch.setattr(nemo_act.common.paths, "convert_root", lambda: tools)
    monkeypatch.setattr(nemo_act.common.paths, "checkout_root", lambda: tmp_path)
    monkeypatch.delenv("NEMO_ACT_CONVERT_PYTHON", raising=False)
    calls = []
    monkeypatch.setattr(subprocess, "call", lambda cmd: calls.append(cmd[0]) or 0)
    assert cmd_convert(["verify", "--help"]) == 0
    (tmp_path / ".venv-megatron" / ".installed").touch()
    assert cmd_convert(["verify", "--help"]) == 0
    assert calls[0] != str(tmp_path / ".venv-megatron" / "bin" / "python")
    assert calls[1] == str(tmp_path / ".venv-megatron" / "bin" / "python")


def test_ctrl_c_stops_a_run_with_one_line_exit_130_and_history_interrupted(scienceworld, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during a run's expert collection: exit
    130, one line on stderr and no traceback (the env workers ignore it and are stopped by the parent), the run
    folder's history says ``interrupted``, and the lock is free again (a second run starts)."""
    import json
    import signal
    import time

    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "nemo_act.cli", "run", "conf/pipeline/il.yaml", "--run-dir", str(run),
           "train=smoke", "pipeline.init=random", "pipeline.eval.stages=none", "pipeline.experts.max_variations=2",
           "pipeline.eval.workers=2"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    # a shell's background job (`cmd &`, nohup, CI runners) starts its children with SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler: give the run the default, as a terminal's foreground job has it
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=default_sigint)  # fmt: skip
    deadline = time.monotonic() + 120
    while not list((run / "data").glob("*.episodes.jsonl*")) and time.monotonic() < deadline:
        time.sleep(0.2)  # the expert collection has begun (its resumable log exists)
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGINT)
    stopped = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    # the env workers were mid-episode: stopped at once, not each waited for to close its envs (30 s apiece before)
    assert time.monotonic() - stopped < 20, f"Ctrl-C took {time.monotonic() - stopped:.0f} s to stop the run"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == "interrupted (Ctrl-C): nemo-act run stopped; run it again to resume"
    events = [json.loads(line) for line in (run / "invocations.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "interrupted"
    from nemo_act.config import load_config
    from nemo_act.run.pipeline import PipelineRunner

    assert PipelineRunner(load_config(run / "config.yaml"), run).history()[-1]["outcome"] == "interrupted"


@pytest.mark.parametrize("case", ["pairs out is a folder", "run dir is a file", "run dir under a file"])
def test_an_output_path_that_cannot_be_written_is_one_line_before_any_work(case, tmp_path):
    """Checked before the first step: no traceback, nothing left behind (pairs used to fail after all its work
    and leave ``pairs.jsonl.states.jsonl``; a run folder at a file was a ``FileExistsError`` traceback)."""
    from conftest import SW_EXPERTS

    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    args, where, said = {
        "pairs out is a folder": (["pairs", "--experts", str(SW_EXPERTS), "--policy", "random", "--out",
                                   str(tmp_path / "adir")], tmp_path / "adir", "a folder is there"),
        "run dir is a file": (["run", "conf/pipeline/il.yaml", "--run-dir", str(tmp_path / "afile")],
                              tmp_path / "afile", "a file is there"),
        "run dir under a file": (["run", "conf/pipeline/il.yaml", "--run-dir", str(tmp_path / "afile" / "run")],
                                 tmp_path / "afile" / "run", f"{tmp_path / 'afile'} is a file"),
    }[case]  # fmt: skip
    before = sorted(p.name for p in tmp_path.rglob("*"))
    done = subprocess.run([sys.executable, "-m", "nemo_act.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {where}: {said}"), lines
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
