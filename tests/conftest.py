"""Shared fixtures: the benchmark data folder, a real tiny model, real ScienceWorld experts.

The shared benchmark data is found through one place, ``NEMO_ACT_BENCHMARKS`` (default
``../shared/benchmarks`` next to the repository); tests that need it skip with a stated reason where
it is absent, so a user's clone passes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from nemo_act.config import load_config

REPO = Path(__file__).resolve().parents[1]

# The tests start a ScienceWorld JVM per episode (fresh_env_per_episode) hundreds of times, for episodes of a few
# steps: there the JVM's start-up JIT is most of the cost. The client compiler alone and the serial GC halve it
# (5 episodes: 24.5 -> 13.2 CPU-s; test_sand's real-state build 180 -> 94 s), the simulator's results are the
# same. Not the product's default: on long episodes and gold-path generation the default JIT is faster.
# Every JVM a test starts inherits it (env workers, Ray workers, subprocesses); py4j sends the JVM's
# "Picked up JAVA_TOOL_OPTIONS" line to /dev/null. Set JAVA_TOOL_OPTIONS yourself to run them otherwise.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# Short ScienceWorld test-split tasks (gold paths of 4-16 steps) keep env tests fast.
SW_FAST_TASKS = ["lifespan-longest-lived", "find-non-living-thing"]


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


@pytest.fixture(scope="session")
def scienceworld() -> None:
    """Skip unless the real ScienceWorld simulator can run here."""
    reason = _scienceworld_ready()
    if reason and os.environ.get("NEMO_ACT_CLUSTER_TWIN") == "1":  # the twin lane must run them, not skip
        pytest.fail(f"make test-cluster: {reason}")
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def sw_fast_tasks() -> list[str]:
    """The ScienceWorld tasks of the ``sw_experts`` fixture."""
    return SW_FAST_TASKS


@pytest.fixture(scope="session")
def cfg():
    """The default experiment config (conf/config.yaml)."""
    return load_config()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, cfg) -> Path:
    """A real tiny random Qwen3 + trained BPE tokenizer, built locally."""
    from nemo_act.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", cfg.model.tiny)


@pytest.fixture(scope="session")
def sw_experts(tmp_path_factory, scienceworld, cfg) -> Path:
    """Real ScienceWorld gold experts: the first test variation of two short tasks."""
    from nemo_act.experts import collect_experts

    out = tmp_path_factory.mktemp("experts") / "experts.jsonl"
    collect_experts(cfg, "test", out, tasks=SW_FAST_TASKS, max_variations=1, workers=1, progress=False)
    return out


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
HEAVY_FIXTURES = {"scienceworld", "sw_experts", "benchmarks_dir", "tiny_model_dir", "random_pairs"}


# `make test` hands whole files to its workers (`--dist loadfile --no-loadscope-reorder`) in the order below: the
# longest files first, so none of them starts last and leaves one core idle while it runs (the longest-processing-
# time rule). xdist's own reorder sorts files by their number of tests, which put test_sand (10 tests, ~6.5 min
# alone) near the end. Seconds alone on this machine (benchmarks/test_cost.py), 2026-12-02.
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
    "test_traces.py",
]


def pytest_collection_modifyitems(config, items):
    """Put the longest test files first; fail collection when a test needs a heavy fixture but is not marked
    ``heavy``."""
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
