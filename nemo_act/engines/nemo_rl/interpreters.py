"""Which Python runs which step of a cluster job: the one place that decides it (engine-free).

The NeMo-RL release container has no single Python with everything in it. From NeMo-RL v0.7.0
(tag commit 81aa43dd):

* ``docker/Dockerfile``: ``ENV UV_PROJECT_ENVIRONMENT=/opt/nemo_rl_venv``; the image's last
  ``uv sync --link-mode symlink --locked --all-groups --no-install-project`` syncs that venv with the
  dependency groups and **no extras**, so the default ``python`` (``ENV PATH="/opt/nemo_rl_venv/bin:$PATH"``)
  has NeMo-RL and Ray but neither vLLM (extra ``vllm``) nor Megatron-Bridge (extra ``mcore``);
  ``ENV NRL_CONTAINER=1``; ``ENV NEMO_RL_VENV_DIR=/opt/ray_venvs``; then
  ``uv run nemo_rl/utils/prefetch_venvs.py``.
* ``nemo_rl/utils/prefetch_venvs.py`` and ``nemo_rl/utils/venvs.py`` (``create_local_venv``): one venv per
  Ray actor class of ``nemo_rl/distributed/ray_actor_environment_registry.py`` at
  ``$NEMO_RL_VENV_DIR/<actor class path>`` (Python at ``bin/python``), synced with that class's extra
  (``nemo_rl/distributed/virtual_cluster.py`` ``PY_EXECUTABLES``): ``VllmGenerationWorker`` -> ``--extra vllm``,
  ``MegatronPolicyWorker`` -> ``--extra mcore``.
* ``examples/converters/convert_megatron_to_hf.py``: "this script requires mcore ... launch with the
  mcore extra".

So a step that needs vLLM (pairs, held-out selection, evaluation with ``generation.backend=vllm``) runs
with the vLLM worker's Python, the Megatron -> HF export with the Megatron worker's, and the pipeline
and the NeMo-RL driver with the image's default one. Outside that container (``NRL_CONTAINER`` unset:
a workstation, CI, a site's own environment) every step runs with the current interpreter. Any of
the three can be pointed elsewhere with ``NEMO_ACT_PYTHON_BASE`` / ``_VLLM`` / ``_MCORE``.

Our own code reaches every venv through ``PYTHONPATH`` (:func:`child_env`): the checkout's root (the
``nemo_act`` package), ``tools/convert`` and its ``autoregister`` folder, so no ``pip install`` runs
at job time. Before a step starts, :func:`check` asks its interpreter for the modules it needs and
stops with the step, the interpreter and the missing package named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from nemo_act.common.paths import convert_root

REPO = Path(__file__).resolve().parents[3]  # the checkout (the image runs jobs from it)
CONVERT = convert_root()

# Dockerfile: ENV UV_PROJECT_ENVIRONMENT=/opt/nemo_rl_venv, ENV NEMO_RL_VENV_DIR=/opt/ray_venvs
CONTAINER_BASE_VENV = "/opt/nemo_rl_venv"
CONTAINER_WORKER_VENVS = "/opt/ray_venvs"
# ray_actor_environment_registry.py: the actor classes whose venvs carry the vllm and mcore extras
WORKER_VENV = {
    "vllm": "nemo_rl.models.generation.vllm.vllm_worker.VllmGenerationWorker",
    "mcore": "nemo_rl.models.policy.workers.megatron_policy_worker.MegatronPolicyWorker",
}
KIND_LABEL = {
    "base": "the image's default Python (NeMo-RL, Ray; no vLLM, no Megatron)",
    "vllm": "NeMo-RL's vLLM worker venv",
    "mcore": "NeMo-RL's Megatron worker venv",
}
# What every step needs besides itself: nemo_act's own dependencies (pyproject.toml).
CORE_MODULES = ("omegaconf", "pydantic", "yaml", "rich", "tqdm")


@dataclass(frozen=True)
class Step:
    """A kind of child process of a cluster job.

    Attributes:
        venv: ``base``, ``vllm`` or ``mcore`` (which interpreter runs it).
        modules: Modules it imports (checked before it starts).
        what: One line for plans and errors.
    """

    venv: str
    modules: tuple[str, ...]
    what: str


def generation_venv(backend: str) -> str:
    """The venv of a generation step: vLLM's for ``backend=vllm``, the default one for ``hf``."""
    return "vllm" if backend == "vllm" else "base"


def step(name: str, backend: str = "hf", benchmark_modules: Sequence[str] = ()) -> Step:
    """The :class:`Step` of a named job step.

    Args:
        name: ``pipeline``, ``experts``, ``pairs``, ``baseline_data``, ``selection``, ``evaluate``, ``driver``
            or ``export``.
        backend: ``generation.backend`` (decides pairs, selection and evaluate).
        benchmark_modules: ``benchmark.python_modules`` (evaluation imports the live env).
    """
    gen = generation_venv(backend)
    gen_mods = ("vllm",) if gen == "vllm" else ("transformers", "torch")
    steps = {
        "pipeline": Step("base", (), "the pipeline runner (nemo-act run)"),
        "experts": Step("base", (), "expert trajectories (in the pipeline's own process)"),
        "pairs": Step(gen, gen_mods, "ACT pairs sampled from the initial policy"),
        "baseline_data": Step(
            gen, (*gen_mods, *benchmark_modules), "a reflection baseline's data (policy samples or rollouts in the env)"
        ),
        "selection": Step(gen, gen_mods, "held-out selection accuracy"),
        "evaluate": Step(gen, (*gen_mods, *benchmark_modules), "evaluation in the benchmark"),
        "driver": Step("base", ("nemo_rl", "ray", "transformers"), "a NeMo-RL training stage"),
        "export": Step("mcore", ("megatron.bridge", "megatron.core", "transformers"), "Megatron -> HF export"),
    }
    if name not in steps:
        raise ValueError(f"unknown job step '{name}'; steps are {sorted(steps)}")
    return steps[name]


def in_container(env: Mapping[str, str] | None = None) -> bool:
    """True inside the NeMo-RL release image (its Dockerfile sets ``NRL_CONTAINER=1``)."""
    return (os.environ if env is None else env).get("NRL_CONTAINER") == "1"


def python_for(venv: str, env: Mapping[str, str] | None = None) -> str:
    """The interpreter of a venv kind (``base``, ``vllm``, ``mcore``).

    ``NEMO_ACT_PYTHON_<KIND>`` wins; inside the release container the layout above; elsewhere the
    current interpreter.
    """
    env = os.environ if env is None else env
    if venv not in KIND_LABEL:
        raise ValueError(f"unknown venv kind '{venv}'; kinds are {sorted(KIND_LABEL)}")
    override = env.get(f"NEMO_ACT_PYTHON_{venv.upper()}")
    if override:
        return override
    if not in_container(env):
        return sys.executable
    if venv == "base":
        return str(Path(env.get("UV_PROJECT_ENVIRONMENT") or CONTAINER_BASE_VENV) / "bin" / "python")
    return str(Path(env.get("NEMO_RL_VENV_DIR") or CONTAINER_WORKER_VENVS) / WORKER_VENV[venv] / "bin" / "python")


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every child process: our code importable from any venv.

    The checkout's root (``nemo_act``), ``tools/convert`` and ``tools/convert/autoregister`` lead
    ``PYTHONPATH``; the last makes every Python that imports Megatron-Bridge, NeMo-RL's Megatron
    workers included (they inherit the driver's environment), register our Olmo-2/3 bridges.
    """
    env = dict(os.environ if base is None else base)
    paths = [str(CONVERT / "autoregister"), str(CONVERT), str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return env


_PROBE = (
    "import importlib.util, json, sys\n"
    "def have(m):\n"
    "    try:\n"
    "        return importlib.util.find_spec(m) is not None\n"
    "    except ModuleNotFoundError:\n"
    "        return False\n"
    "print(json.dumps([m for m in sys.argv[1:] if not have(m)]))\n"
)


@cache
def missing_modules(python: str, modules: tuple[str, ...], pythonpath: str) -> tuple[str, ...]:
    """Modules of ``modules`` that ``python`` cannot import (with our ``PYTHONPATH``)."""
    if not Path(python).exists() and not any(
        (Path(p) / python).exists() for p in os.environ.get("PATH", "").split(os.pathsep)
    ):
        raise InterpreterError(f"{python} does not exist")
    env = {**os.environ, "PYTHONPATH": pythonpath}
    res = subprocess.run([python, "-c", _PROBE, *modules], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise InterpreterError(f"{python} failed to start: {res.stderr.strip()[-500:]}")
    return tuple(json.loads(res.stdout.strip().splitlines()[-1]))


class InterpreterError(RuntimeError):
    """A step's interpreter is absent or lacks a package it needs."""


def check(name: str, python: str, spec: Step) -> None:
    """Stop before a step starts when its interpreter cannot import what it needs.

    Raises:
        InterpreterError: Naming the step, the interpreter (and which venv it is) and the packages.
    """
    pythonpath = child_env()["PYTHONPATH"]
    try:
        missing = missing_modules(python, (*CORE_MODULES, *spec.modules), pythonpath)
    except InterpreterError as err:
        raise InterpreterError(f"step '{name}' ({spec.what}) needs {KIND_LABEL[spec.venv]}, but {err}") from err
    if missing:
        raise InterpreterError(
            f"step '{name}' ({spec.what}) runs with {python} ({KIND_LABEL[spec.venv]}), which lacks "
            f"{', '.join(missing)}. In the NeMo-RL container build the prepared image (slurm/build_image.sub); "
            f"elsewhere install it into that Python or point NEMO_ACT_PYTHON_{spec.venv.upper()} at one that has it."
        )


def command(name: str, argv: Sequence[str], backend: str = "hf", benchmark_modules: Sequence[str] = ()) -> list[str]:
    """``[python, *argv]`` for a job step, after checking its interpreter (see :func:`check`)."""
    spec = step(name, backend, benchmark_modules)
    python = python_for(spec.venv)
    if os.environ.get("NEMO_ACT_DRY_RUN") != "1":
        check(name, python, spec)
    return [python, *argv]
