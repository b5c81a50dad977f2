"""ALFWorld on the real game files in ../shared/benchmarks/alfworld, with the real `alfworld` package."""

import hashlib
import os
import signal
from pathlib import Path

import pytest

from nemo_act.config import load_config
from nemo_act.data import Trajectory, read_jsonl, read_manifest, write_jsonl
from nemo_act.evaluation.rollout import EpisodeRecord, evaluate_policy, list_episodes
from nemo_act.generation import GoldGenerator, RandomGenerator

# Two short valid_seen games (the handcoded expert wins them in 5 and 11 steps).
FAST_GAMES = ["AlarmClock-None-DeskLamp-323", "Bowl-None-DeskLamp-316"]


@pytest.fixture(scope="module")
def alf_cfg(benchmarks_dir, tmp_path_factory):
    pytest.importorskip("alfworld", reason="the alfworld package is not installed (pip install -e '.[envs]')")
    root = benchmarks_dir / "alfworld"
    if not (root / "json_2.1.1").is_dir():
        pytest.skip(f"ALFWorld game files not found at {root}")
    cache = tmp_path_factory.mktemp("alfworld_cache")
    return load_config(overrides=["benchmark=alfworld", f"benchmark.data_dir={root}", f"benchmark.cache_dir={cache}"])


@pytest.mark.heavy
def test_splits_count_the_protocols_episodes(alf_cfg):
    assert len(list_episodes(alf_cfg, "valid_seen")) == 140  # ID
    assert len(list_episodes(alf_cfg, "valid_unseen")) == 134  # OOD
    with pytest.raises(ValueError, match="unknown ALFWorld split 'test'"):
        list_episodes(alf_cfg, "test")


@pytest.mark.heavy
def test_missing_data_dir_is_a_clear_error(alf_cfg, monkeypatch, tmp_path):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    cfg = load_config(overrides=["benchmark=alfworld", f"benchmark.data_dir={tmp_path}"])
    with pytest.raises(FileNotFoundError, match="set benchmark.data_dir"):
        list_episodes(cfg, "valid_seen")


@pytest.mark.heavy
def test_games_are_rebuilt_into_the_cache_and_the_users_files_are_untouched(alf_cfg):
    from nemo_act.benchmarks import alfworld

    root = Path(alf_cfg.benchmark.data_dir)
    gid = next(g for g, _ in list_episodes(alf_cfg, "valid_seen") if FAST_GAMES[0] in g)
    source = root / "json_2.1.1" / gid / "game.tw-pddl"
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    cache = Path(alf_cfg.benchmark.cache_dir)
    built = alfworld.rebuilt_game(root, gid, cache)
    assert built.is_relative_to(cache) and (built.parent / "traj_data.json").exists()
    assert "UNKNOWN GOAL" not in built.read_text()  # the task is in the grammar
    mtime = built.stat().st_mtime_ns
    assert alfworld.rebuilt_game(root, gid, cache) == built and built.stat().st_mtime_ns == mtime
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before


@pytest.mark.heavy
def test_gold_policy_plays_the_handcoded_expert_live(alf_cfg, tmp_path):
    res = evaluate_policy(
        GoldGenerator(),
        alf_cfg,
        "valid_seen",
        tmp_path,
        tasks=FAST_GAMES,
        seeds=[0],
        workers=1,
        envs_per_worker=2,
        progress=False,
    )
    assert res["episodes"] == 2 and res["completion_mean"] == 100.0
    records = list(read_jsonl(tmp_path / "seed_0" / "episodes.jsonl", EpisodeRecord))
    assert all(r.success and len(r.steps) < 20 for r in records)
    assert "Your admissible actions" in records[0].steps[0]["prompt"]
    assert "'help'" not in records[0].steps[0]["prompt"]


@pytest.mark.heavy
def test_train_experts_are_won_and_every_action_was_admissible(alf_cfg, tmp_path):
    from nemo_act.steps.experts import collect_experts

    out = tmp_path / "alfworld_train.jsonl"
    tasks = ["pick_and_place_simple-Book-", "pick_and_place_simple-Candle-"]
    summary = collect_experts(alf_cfg, "train", out, tasks=tasks, workers=2, progress=False)
    trajs = list(read_jsonl(out, Trajectory))
    assert summary.counts["episodes"] >= 5 and len(trajs) == summary.counts["won"] >= 4
    for t in trajs:
        assert t.success and t.benchmark == "alfworld" and t.task_description
        assert all(s.action in s.admissible_actions and "help" not in s.admissible_actions for s in t.steps)
    assert read_manifest(out)["counts"]["steps_admissible"] == sum(len(t.steps) for t in trajs)

    # another policy's rollouts in our schema (here: these, one marked lost) become experts too
    from nemo_act.cli import main

    rollouts = tmp_path / "gigpo_rollouts.jsonl"
    lost = trajs[0].model_copy(update={"trajectory_id": "alfworld/lost/0", "success": False, "score": 0.0})
    write_jsonl(rollouts, [*trajs, lost])
    imported = tmp_path / "imported.jsonl"
    args = ["experts", "--benchmark", "alfworld", "--data-dir", alf_cfg.benchmark.data_dir]
    assert main([*args, "--from-rollouts", str(rollouts), "--out", str(imported)]) == 0
    assert list(read_jsonl(imported, Trajectory)) == trajs
    assert read_manifest(imported)["counts"]["failed"] == ["alfworld/lost/0"]
    wrong = ["experts", "--benchmark", "webshop", "--from-rollouts", str(rollouts), "--out", str(tmp_path / "w")]
    assert main(wrong) == 2  # ALFWorld trajectories are not WebShop experts


class KilledOnce:
    """A real ALFWorld env whose worker process is SIGKILLed at its 3rd step, the first time only.

    The kill is real (the process dies as under an OOM killer); a marker file makes the restarted
    worker's envs behave normally.
    """

    def __init__(self, cfg, marker: str) -> None:
        from nemo_act.benchmarks.alfworld import EpisodeEnv

        self.env, self.marker, self.steps = EpisodeEnv(cfg), Path(marker), 0

    def reset(self, *args):
        return self.env.reset(*args)

    def step(self, action):
        self.steps += 1
        if self.steps == 3 and not self.marker.exists():
            self.marker.write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)
        return self.env.step(action)

    def close(self):
        self.env.close()


@pytest.mark.heavy
def test_a_killed_worker_is_restarted_and_its_episodes_replayed(alf_cfg, tmp_path, monkeypatch):
    import functools

    from nemo_act.evaluation import rollout

    marker = tmp_path / "killed.txt"
    monkeypatch.setattr(
        rollout, "_env_factory", lambda cfg, expert: functools.partial(KilledOnce, cfg.benchmark, str(marker))
    )
    res = evaluate_policy(
        RandomGenerator(),
        alf_cfg,
        "valid_seen",
        tmp_path / "eval",
        tasks=FAST_GAMES,
        seeds=[0],
        workers=1,
        envs_per_worker=2,
        progress=False,
    )
    assert marker.exists()  # the worker really died once
    records = list(read_jsonl(tmp_path / "eval" / "seed_0" / "episodes.jsonl", EpisodeRecord))
    assert res["episodes"] == 2 and sorted(r.episode_id for r in records) == sorted({r.episode_id for r in records})
    # both episodes were replayed from their first step on the fresh worker: full length, no gap
    assert all(len(r.steps) == alf_cfg.benchmark.max_steps or r.success for r in records)
    assert all(r.steps[0]["prompt"].count("You are now at step 1 ") == 1 for r in records)


@pytest.mark.heavy
def test_an_expert_episode_repeats_exactly(alf_cfg):
    from nemo_act.benchmarks import alfworld

    gid = next(g for g, _ in list_episodes(alf_cfg, "valid_seen") if FAST_GAMES[1] in g)
    env = alfworld.EpisodeEnv(alf_cfg.benchmark, expert=True)
    try:
        first, again = (alfworld.play_handcoded(env, gid, "valid_seen", 50) for _ in range(2))
        assert first == again and first.success
    finally:
        env.close()


@pytest.mark.heavy
def test_reflection_baselines_build_on_real_alfworld_states(alf_cfg, tmp_path):
    """Early Experience, SAND and Agent-R on an ALFWorld game: branching replays of the handcoded expert's
    prefix reach its recorded observations (the expert's own action leads to the recorded next one), SAND's
    roll-ons start there and play on with the random policy, and a random policy's rollout from the game's
    start deviates, acting first on the expert's recorded state."""
    from scripted_policy import ScriptedPolicy

    from nemo_act.generation.simple import RandomGenerator
    from nemo_act.reflection.agent_r import build_agent_r, read_revisions
    from nemo_act.reflection.early_experience import build_early_experience, read_reflections
    from nemo_act.reflection.sand import build_sand, read_deliberations
    from nemo_act.steps.experts import collect_experts

    everything = tmp_path / "all.jsonl"
    collect_experts(alf_cfg, "train", everything, tasks=["pick_and_place_simple-Book-"], workers=2, progress=False)
    traj = min(read_jsonl(everything, Trajectory), key=lambda t: len(t.steps))
    experts = tmp_path / "experts.jsonl"
    experts.write_text(traj.model_dump_json() + "\n")
    cfg = alf_cfg.model_copy(update={"early_experience": alf_cfg.early_experience.model_copy(update={"k": 2})})
    ee = read_reflections(build_early_experience(cfg, experts, ScriptedPolicy(), tmp_path / "ee", 2, False).out)
    assert len(ee) == len(traj.steps) and all(r.reason != "branch_failed" for r in ee)
    for r in ee:
        expert = next(c for c in r.candidates if c.source == "expert")
        if r.index + 1 < len(traj.steps):
            assert expert.observation.split() == traj.steps[r.index + 1].observation.split()
        assert len({c.action for c in r.candidates}) == 3
    sd = cfg.sand.model_copy(update={"candidates": 2, "rollout_steps": 2})
    sand = read_deliberations(build_sand(cfg.model_copy(update={"sand": sd}), experts, ScriptedPolicy(),
                                         tmp_path / "sand", 2, False).out)  # fmt: skip
    assert len(sand) == len(traj.steps) and all(r.reason != "rollout_failed" for r in sand)
    for r in sand:
        expert = next(c for c in r.candidates if c.source == "expert")
        if r.index + 1 < len(traj.steps):
            assert expert.steps[0][1].split() == traj.steps[r.index + 1].observation.split()
        assert all(1 <= c.n_steps <= 3 and c.critique for c in r.candidates)
    ar = read_revisions(build_agent_r(cfg, experts, RandomGenerator(), tmp_path / "ar", 1, False).out)
    (rev,) = ar
    assert rev.kept and rev.wrong[0].observation == traj.steps[rev.deviation].observation


def test_textworlds_grammar_eval_sees_its_variables_on_every_python():
    """textworld 1.7.0's EvalSymbol.derive fills ``locals()`` then ``eval``s (textgen/__init__.py:94-97): on
    Python 3.13 (PEP 667; NeMo-RL's image) the names are lost and every ALFWorld reset raised NameError. The
    shim hands eval the same names; on an older Python both give the same text."""
    import sys
    from types import SimpleNamespace

    textgen = pytest.importorskip("textworld.envs.pddl.textgen")
    from nemo_act.benchmarks import textworld_compat

    assert textworld_compat.apply() and textworld_compat.apply()  # idempotent
    patched = textgen.EvalSymbol.derive
    original = patched._original
    ctx = {"variables": {"r": SimpleNamespace(name="kitchen")}}
    sym = textgen.EvalSymbol("r.name + ' ' + str(len(context['variables']))", {})
    assert [t.symbol for t in patched(sym, ctx)] == ["kitchen 1"]
    if sys.version_info >= (3, 13):
        with pytest.raises(NameError):
            original(sym, ctx)  # the bug the shim exists for
    else:
        assert [t.symbol for t in original(sym, ctx)] == ["kitchen 1"]
