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


def test_cluster_steps_run_in_their_venvs_and_a_missing_package_is_named(
    container, sw_experts, tmp_path, monkeypatch, capsys
):
    """A cluster-engine run's GPU generation step (pairs) really runs in the vLLM venv's Python; the driver
    and the export are started with the default and the Megatron venv's; each stops with the package
    named when its venv lacks it."""
    from nemo_act.engines.nemo_rl.launch import driver_command, export_command
    from nemo_act.pipeline import PipelineRunner

    pythons, log = container
    cfg = load_config(overrides=["engine=nemo_rl", "generation=vllm", "pipeline.pairs_policy=random"])
    runner = PipelineRunner(cfg, tmp_path / "run")
    assert runner.isolate
    out = runner.pairs(sw_experts, "pairs.jsonl")
    pairs = list(read_jsonl(out, Pair))
    assert pairs and all(p.expert_action in p.candidates for p in pairs)
    ran = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert [kind for kind, args in ran if "nemo_act.pipeline" in args] == ["vllm"]
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
