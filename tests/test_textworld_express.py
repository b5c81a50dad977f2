"""TextWorld-Express adapter on the real simulator (pip package ``textworld-express``, Java): issue 44, part 1.

Every configured game's gold path finishes with full score in every fold; the folds' seeds never meet, so a test
episode is never an expert or a tuning one; experts are collected through the same step as every benchmark, with
counts; a bad game parameter and a missing Java are one line each; the evaluation env replays an expert's states.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import java_options_without_class_archive

from nemo_act.benchmarks.base import adapter, restore
from nemo_act.config import load_config
from nemo_act.data import Trajectory, read_jsonl, read_manifest

pytestmark = pytest.mark.heavy  # a JVM per test (tests/conftest.py says what heavy means)


@pytest.fixture(scope="module")
def twx():
    """The adapter and the default config; skips where the simulator cannot run.

    The ``scienceworld`` fixture's class archive (``-XX:SharedArchiveFile`` in ``JAVA_TOOL_OPTIONS``) is
    ScienceWorld's: another jar's JVM prints a CDS warning on stdout, where py4j reads its port. It is left out here.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAVA_TOOL_OPTIONS", java_options_without_class_archive())
        yield _twx()


def _twx():
    pytest.importorskip("textworld_express", reason="the textworld-express package is not installed (.[envs])")
    if shutil.which("java") is None:
        pytest.skip("TextWorld-Express needs Java on PATH")
    from nemo_act.benchmarks import textworld_express

    return textworld_express, load_config(overrides=["benchmark=textworld_express"])


def test_the_adapter_meets_the_benchmark_protocol_and_no_core_module_names_it(twx):
    from pathlib import Path

    module, cfg = twx
    assert adapter(cfg.benchmark.adapter) is module and cfg.benchmark.live_experts
    core = Path(module.__file__).parents[1]
    named = [str(p.relative_to(core)) for p in core.rglob("*.py")
             if p.parent.name != "benchmarks" and "textworld_express" in p.read_text()]  # fmt: skip
    assert named == []


def test_gold_paths_win_for_every_game_in_every_fold(twx):
    module, cfg = twx
    bench = cfg.benchmark
    env = module.expert_env(bench)
    try:
        lengths = {}
        for split in ("train", "dev", "test"):
            for task, seed in module.episodes(bench, split, None, 2):
                traj, counts, _ = module.play_expert(env, bench, task, seed, split)
                assert traj.success and traj.score == 100.0 and counts["gold_unfinished"] == 0, (task, seed)
                assert all(s.admissible_actions for s in traj.steps) and counts["gold_not_in_valid"] == 0
                lengths[task, seed] = len(traj.steps)
    finally:
        env.close()
    assert {t for t, _ in lengths} == {g.task for g in bench.games} and len(lengths) == 8 * 3 * 2
    assert max(lengths.values()) <= bench.max_steps


def test_an_expert_is_a_function_of_its_seed_though_the_env_draws_random_gold_walks(twx):
    """TextWorld-Express 1.1.0 draws coin's gold path as a random walk the API does not seed (train seed 8: 4 to 18
    steps over 8 draws in one JVM), so experts changed from one collection to the next. With ``erase_loops`` the
    loop-free route is kept: the same expert on every draw, in a JVM with another history, and never longer than
    any draw."""
    module, cfg = twx
    bench = cfg.benchmark
    coin = next(g.task for g in bench.games if g.game == "coin")
    envs = [module.expert_env(bench), module.expert_env(bench)]
    try:
        setting = module._setting(bench, coin)
        for seed in (8, 9):
            drawn = set()
            for _ in range(6):
                envs[0].start(setting, seed, gold_path=True)
                drawn.add(tuple(envs[0].getGoldActionSequence()))
            experts = [module.play_expert(envs[0], bench, coin, seed, "train")[0] for _ in range(4)]
            experts.append(module.play_expert(envs[1], bench, coin, seed, "train")[0])  # a fresh JVM
            assert all(e.success and e.steps == experts[0].steps for e in experts), seed
            assert len(experts[0].steps) <= min(len(d) for d in drawn)
    finally:
        for env in envs:
            env.close()


def test_test_fold_seeds_are_never_training_or_dev_seeds(twx):
    module, cfg = twx
    folds = {split: set(module.episodes(cfg.benchmark, split, None, 10**6)) for split in ("train", "dev", "test")}
    assert all(len(f) == 8 * 1000 for f in folds.values())  # every seed of every fold, for each of 8 tasks
    assert not folds["test"] & folds["train"] and not folds["test"] & folds["dev"] and not folds["train"] & folds["dev"]
    first = module.episodes(cfg.benchmark, "test", ["arithmetic"], None)  # max_variations: the config's 20
    assert len(first) == cfg.benchmark.max_variations
    assert first[:3] == [("arithmetic", 20000), ("arithmetic", 20001), ("arithmetic", 20002)]


def test_a_task_list_may_name_a_game_with_one_setting(twx):
    module, cfg = twx
    coin = cfg.benchmark.games[0].task
    assert coin.startswith("coin:")
    assert module.episodes(cfg.benchmark, "dev", ["coin"], 2) == [(coin, 10000), (coin, 10001)]
    games = ("{game: coin, params: {numLocations: 4}}", "{game: coin, params: {numLocations: 5}}",
             "{game: sorting, params: {}}")  # fmt: skip
    two = load_config(overrides=["benchmark=textworld_express", f"benchmark.games=[{', '.join(games)}]"]).benchmark
    assert module.resolve_tasks(two, ["sorting", "coin:numLocations=5"]) == ["sorting", "coin:numLocations=5"]
    with pytest.raises(ValueError, match=r"game 'coin' has 2 settings: name one; the config's tasks are: "
                                         r"coin:numLocations=4, coin:numLocations=5, sorting"):  # fmt: skip
        module.episodes(two, "dev", ["coin"], 1)
    with pytest.raises(ValueError, match=r"unknown task 'twc'"):
        module.resolve_tasks(two, ["twc"])


def test_experts_are_collected_with_counts_and_the_env_replays_their_states(twx, tmp_path):
    from nemo_act.steps.experts import collect_experts

    module, cfg = twx
    out = tmp_path / "experts.jsonl"
    summary = collect_experts(cfg, "train", out, max_variations=2, workers=2, progress=False)
    counts = read_manifest(out)["counts"]
    assert summary.counts["won"] == counts["episodes"] == 16 and counts["failed"] == []
    assert counts["gold_actions"] == counts["steps"] and counts["gold_unfinished"] == 0
    trajs = list(read_jsonl(out, Trajectory))
    assert [t.trajectory_id for t in trajs][:2] == [
        f"textworld_express/{cfg.benchmark.games[0].task}/{s}" for s in (0, 1)
    ]
    env = module.env_factory(cfg.benchmark, expert=False)()
    try:
        traj = max(trajs, key=lambda t: len(t.steps))  # cookingworld: the longest gold path
        assert restore(env, traj, len(traj.steps) - 1).observation == traj.steps[-1].observation
        last = env.step(traj.steps[-1].action)
        assert last.done and last.score == 100.0
    finally:
        env.close()


def test_a_parameter_the_game_does_not_know_is_one_line_naming_the_entry(twx):
    module, _ = twx
    cfg = load_config(overrides=["benchmark=textworld_express",
                                 "benchmark.games=[{game: coin, params: {numRooms: 4}}]"]).benchmark  # fmt: skip
    with pytest.raises(ValueError, match=r"benchmark\.games\[0\] \(coin:numRooms=4\): Unrecognized property name "
                                         r"\(numRooms\)\. +Known properties: numLocations"):  # fmt: skip
        module.episodes(cfg, "train", None, 1)


def test_java_missing_is_one_line(twx, monkeypatch, tmp_path):
    module, cfg = twx
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="^TextWorld-Express runs on Java: no 'java' on PATH"):
        module.expert_env(cfg.benchmark)
