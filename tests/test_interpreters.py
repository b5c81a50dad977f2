"""Which Python runs which job step, in a stand-in of the NeMo-RL v0.7.0 container's venv layout.

The layout follows the release's own files (tag commit 81aa43dd), see
``nemo_act/engines/nemo_rl/interpreters.py``: ``docker/Dockerfile`` (``UV_PROJECT_ENVIRONMENT=/opt/nemo_rl_venv``
synced with no extras, so no vLLM or Megatron there; ``NEMO_RL_VENV_DIR=/opt/ray_venvs``; ``NRL_CONTAINER=1``)
and ``nemo_rl/utils/venvs.py`` ``create_local_venv`` (one venv per actor class at
``$NEMO_RL_VENV_DIR/<actor class path>/bin/python``). Stand-ins (this machine has neither the image nor
GPUs): each venv's ``bin/python`` is a bash wrapper, shaped like the ``python-<Class>`` wrappers
``prefetch_venvs.create_frozen_environment_symlinks`` writes, that logs its venv and runs our own
interpreter with that venv's packages on ``PYTHONPATH``; the packages that make a venv what it is
(``nemo_rl`` in the default one, ``vllm`` in the vLLM worker's, ``megatron.core`` + ``megatron.bridge`` in
the Megatron worker's) are empty stand-in packages. Everything else (the runner, its child processes,
the pair sampling they run, the interpreter checks) is real.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

from nemo_act.config import load_config
from nemo_act.data import Pair, read_jsonl
from nemo_act.engines.nemo_rl import interpreters
from nemo_act.engines.nemo_rl.interpreters import WORKER_VENV, InterpreterError

STAND_INS = {"base": ["nemo_rl"], "vllm": ["vllm"], "mcore": ["megatron/core", "megatron/bridge"]}


def _venv(root: Path, kind: str, log: Path, packages: list[str]) -> Path:
    site = root / "site"
    for pkg in packages:
        (site / pkg).mkdir(parents=True, exist_ok=True)
        (site / pkg / "__init__.py").write_text("")
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(
        "#!/bin/bash\n"
        f'{{ printf %s {kind}; printf " %q" "$@"; echo; }} >> "{log}"\n'
        f'export VIRTUAL_ENV="{root}"\n'
        f'export PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    return python


@pytest.fixture
def container(tmp_path, monkeypatch):
    """The release image's venvs under tmp_path/opt, and the variables its Dockerfile sets."""
    log = tmp_path / "pythons.log"
    log.touch()
    opt = tmp_path / "opt"
    roots = {
        "base": opt / "nemo_rl_venv",
        "vllm": opt / "ray_venvs" / WORKER_VENV["vllm"],
        "mcore": opt / "ray_venvs" / WORKER_VENV["mcore"],
    }
    pythons = {kind: _venv(root, kind, log, STAND_INS[kind]) for kind, root in roots.items()}
    for key, value in {
        "NRL_CONTAINER": "1",
        "UV_PROJECT_ENVIRONMENT": str(roots["base"]),
        "NEMO_RL_VENV_DIR": str(opt / "ray_venvs"),
    }.items():
        monkeypatch.setenv(key, value)
    for kind in pythons:
        monkeypatch.delenv(f"NEMO_ACT_PYTHON_{kind.upper()}", raising=False)
    interpreters.missing_modules.cache_clear()
    yield pythons, log
    interpreters.missing_modules.cache_clear()


def test_each_step_names_the_venv_the_release_image_has_for_it(container, monkeypatch):
    pythons, _log = container
    expect = {
        "pipeline": "base", "experts": "base", "driver": "base", "export": "mcore",
        "pairs": "vllm", "selection": "vllm", "evaluate": "vllm",
    }  # fmt: skip
    for name, kind in expect.items():
        spec = interpreters.step(name, backend="vllm", benchmark_modules=["scienceworld"])
        assert spec.venv == kind and interpreters.python_for(spec.venv) == str(pythons[kind]), name
    assert interpreters.step("pairs", backend="hf").venv == "base"  # HF generation needs no vLLM
    assert "scienceworld" in interpreters.step("evaluate", "vllm", ["scienceworld"]).modules
    monkeypatch.setenv("NEMO_ACT_PYTHON_VLLM", "/site/vllm/bin/python")
    assert interpreters.python_for("vllm") == "/site/vllm/bin/python"
    monkeypatch.delenv("NRL_CONTAINER")
    assert interpreters.python_for("mcore") == sys.executable  # outside the image: the current Python


@pytest.mark.heavy
def test_cluster_steps_run_in_their_venvs_and_a_missing_package_is_named(
    container, sw_experts, tmp_path, monkeypatch, capsys
):
    """A cluster-engine run's GPU generation step (pairs) really runs in the vLLM venv's Python; the driver
    and the export are started with the default and the Megatron venv's; each stops with the package
    named when its venv lacks it."""
    from nemo_act.engines.nemo_rl.launch import driver_command, export_command
    from nemo_act.run.pipeline import PipelineRunner

    pythons, log = container
    cfg = load_config(overrides=["engine=nemo_rl", "generation=vllm", "pipeline.pairs_policy=random"])
    runner = PipelineRunner(cfg, tmp_path / "run")
    assert runner.isolate
    out = runner.pairs(sw_experts, "pairs.jsonl")
    pairs = list(read_jsonl(out, Pair))
    assert pairs and all(p.expert_action in p.candidates for p in pairs)
    ran = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert [kind for kind, args in ran if "nemo_act.run.pipeline" in args] == ["vllm"]
    assert [kind for kind, args in ran if "importlib.util" in args] == ["vllm"]  # the check ran there first

    assert driver_command("act", "/ckpt", tmp_path / "s")[0] == str(pythons["base"])
    export = export_command(tmp_path / "w", "/ckpt", tmp_path / "hf")
    assert export[0] == str(pythons["mcore"]) and export[-2:] == ["--device", "cpu"]

    for kind, package, call in (
        ("vllm", "vllm", lambda: runner.pairs(sw_experts, "more_pairs.jsonl")),
        ("base", "nemo_rl", lambda: driver_command("act", "/ckpt", tmp_path / "s")),
        ("mcore", "megatron", lambda: export_command(tmp_path / "w", "/ckpt", tmp_path / "hf")),
    ):
        site = pythons[kind].parent.parent / "site"
        site.rename(site.with_name("gone"))
        interpreters.missing_modules.cache_clear()
        with pytest.raises(InterpreterError, match=rf"runs with {pythons[kind]} \(.*\), which lacks {package}"):
            call()
        site.with_name("gone").rename(site)
    assert not (tmp_path / "run" / "data" / "more_pairs.jsonl").exists()  # stopped before it started


def test_an_absent_venv_is_named_with_its_step(container):
    pythons, _log = container
    os.remove(pythons["mcore"])
    with pytest.raises(InterpreterError, match=r"step 'export' \(Megatron -> HF export\) needs NeMo-RL's Megatron"):
        interpreters.command("export", ["x.py"])


def _hf_cache(home: Path, name: str, model_dir: Path) -> Path:
    """``name`` in an HF hub cache under ``home`` (the layout huggingface_hub writes: refs/main -> snapshot)."""
    repo = home / "hub" / f"models--{name.replace('/', '--')}"
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    for f in model_dir.iterdir():
        (snapshot / f.name).symlink_to(f)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    return snapshot


@pytest.mark.heavy
def test_cluster_check_names_every_missing_model_package_and_program(
    container, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    """``nemo-act cluster-check`` as the job runs it before Ray starts (HF_HUB_OFFLINE=1), in the stand-in image."""
    from nemo_act.cli import main
    from nemo_act.config import conf_root
    from nemo_act.engines.nemo_rl.preflight import run_checks

    pythons, _log = container
    recipe = str(conf_root() / "recipes" / "scienceworld" / "act-qwen3-4b-2n4g-megatron.yaml")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    (pythons["vllm"].parent.parent / "site" / "scienceworld").mkdir()
    (pythons["vllm"].parent.parent / "site" / "scienceworld" / "__init__.py").write_text("")
    _hf_cache(tmp_path / "hf", "Qwen/Qwen3-4B", tiny_model_dir)
    checks = {c.name: c for c in run_checks(load_config(recipe))}
    assert checks["model Qwen/Qwen3-4B"].ok
    assert not checks["model Qwen/Qwen3-8B"].ok and "not in the HF cache" in checks["model Qwen/Qwen3-8B"].detail
    assert all(checks[f"step {s}"].ok for s in ("pipeline", "pairs", "selection", "driver", "export", "evaluate"))
    assert checks["scienceworld needs java"].ok == (shutil.which("java") is not None)

    snapshot = _hf_cache(tmp_path / "hf", "Qwen/Qwen3-8B", tiny_model_dir)
    (snapshot / "model.safetensors").unlink()  # a download cut short
    (pythons["mcore"].parent.parent / "site" / "megatron" / "bridge" / "__init__.py").unlink()
    (pythons["mcore"].parent.parent / "site" / "megatron" / "bridge").rmdir()
    monkeypatch.setenv("PATH", str(pythons["base"].parent))  # no java
    interpreters.missing_modules.cache_clear()
    assert main(["cluster-check", recipe]) == 1
    err = capsys.readouterr().err
    assert "model Qwen/Qwen3-8B" in err and "lacks config.json or weights" in err
    assert "step export" in err and "lacks megatron.bridge" in err
    assert "scienceworld needs java: java is not on PATH" in err
    assert "step driver" not in err and "model Qwen/Qwen3-4B" not in err


@pytest.mark.heavy
@pytest.mark.slow
def test_env_bound_steps_run_alone_and_the_preflight_counts_collected_experts(cfg, tmp_path, sw_fast_tasks):
    """``nemo-act run --only experts`` (slurm/env_steps.sub on x86 nodes) collects what the training job's
    preflight then accepts in place of the simulator; ``--only evaluate`` needs finished stages."""
    from nemo_act.engines.nemo_rl.preflight import check_benchmark
    from nemo_act.run.pipeline import PipelineRunner

    pytest.importorskip("scienceworld")
    if shutil.which("java") is None:
        pytest.skip("ScienceWorld needs Java")
    src = {"split": "test", "tasks": sw_fast_tasks[:1], "max_variations": 1}
    run_cfg = load_config(
        overrides=[f"pipeline.experts={src}".replace("'", ""), f"pipeline.heldout={src}".replace("'", "")]
    )
    run = tmp_path / "run"
    assert check_benchmark(run_cfg, run)[0].detail.startswith("scienceworld in ")  # not collected yet
    log = PipelineRunner(run_cfg, run).run(only="experts")
    assert [Path(p).name for p in log["experts"]] == ["experts.jsonl", "heldout_experts.jsonl"]
    (done,) = check_benchmark(run_cfg.model_copy(update={"benchmark": run_cfg.benchmark}), run)
    assert done.ok and done.detail.startswith("collected already:")
    assert not (run / "stages").exists() and not (run / "data" / "pairs.jsonl").exists()
    with pytest.raises(ValueError, match="no finished stage to evaluate"):
        PipelineRunner(run_cfg, run).run(only="evaluate")
