"""SAND data on the benchmark protocol: candidates, roll-on from branched states, critiques, deliberation, rows.

The row and candidate tests use constructed trajectories; the builder runs on real ScienceWorld gold states
(JVM) with the real random policy sampling and rolling on, and a scripted critic
(``tests/scripted_policy.py``) whose deliberations are made to hit each filter.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted_policy import KINDS, ScriptedPolicy, kind_of

from nemo_act.config.load import load_config
from nemo_act.data.io import read_jsonl
from nemo_act.data.manifest import read_manifest
from nemo_act.data.records import Trajectory
from nemo_act.evaluation.rollout import EpisodeRecord
from nemo_act.generation.simple import wrap_action
from nemo_act.kinds.imitation import il_rows
from nemo_act.kinds.reflection import sand_rows
from nemo_act.reflection.sand import DeliberationRecord, build_sand, distinct_actions, read_deliberations
from nemo_act.run.plan import plan
from nemo_act.stage_data import expand

REPO = Path(__file__).resolve().parents[1]


def _words(text: str) -> list[str]:
    return " ".join(text.lower().split()).split()


def _cfg(tmp_path, *extra):
    return load_config(
        overrides=["sand.chunk=4", "sand.candidates=3", "sand.rollout_steps=2", f"run_dir={tmp_path / 'run'}", *extra]
    )


def _expert() -> Trajectory:
    rooms = ["kitchen", "hallway", "workshop"]
    steps = [
        {"observation": f"You are in the {rooms[j]}.", "action": f"go to {rooms[j + 1]}",
         "admissible_actions": [f"go to {r}" for r in rooms] + ["look around"], "action_admissible": True}
        for j in range(2)
    ]  # fmt: skip
    return Trajectory.model_validate(
        {"trajectory_id": "scienceworld/walk/0", "benchmark": "scienceworld", "task_id": "walk", "variation": 0,
         "split": "train", "task_description": "Walk to the workshop.", "steps": steps, "score": 100.0,
         "success": True, "source": "test"}
    )  # fmt: skip


def test_candidates_are_the_distinct_non_expert_samples():
    samples = ["<action>open door</action>", "<action>Open Door.</action>", "<action>look around</action>",
               "<action>LOOK AROUND</action>", "no tag", "<action>go east</action>"]  # fmt: skip
    actions, same = distinct_actions(samples, ["look around"])
    assert actions == ["open door", "go east"] and same == 2
    assert distinct_actions(["<action>look around</action>"] * 5, ["look around"]) == ([], 5)


def test_rows_put_a_kept_deliberation_before_the_expert_action_at_every_state():
    """The SFT target is the expert trajectory: every state has a row, a state with a kept deliberation has
    it as the thought before the expert's action, the others (dropped, all-expert) the plain action."""
    cfg = load_config()
    expert = _expert()
    base = {"trajectory_id": expert.trajectory_id, "expert_action": "go to hallway"}
    kept = DeliberationRecord(state_id=f"{expert.trajectory_id}/0", index=0, deliberation="Walking on reaches it."
                              "\n<action>go to hallway</action>", kept=True, reason="kept", **base)  # fmt: skip
    dropped = DeliberationRecord(state_id=f"{expert.trajectory_id}/1", index=1, deliberation="<action>x</action>",
                                 kept=False, reason="concludes_other", **base)  # fmt: skip
    rows = sand_rows([kept, dropped], [expert], cfg)
    assert len(rows) == len(expert.steps)
    targets = [r["completion"][0]["content"] for r in rows]
    assert targets == [f"Walking on reaches it.\n{wrap_action('go to hallway')}", wrap_action("go to workshop")]
    assert [r["prompt"] for r in rows] == [r["prompt"] for r in il_rows([expert], cfg)]


def test_iterations_repeat_the_sand_stage_and_nothing_else():
    cfg = load_config(overrides=["sand.iterations=3"])
    assert expand(["sand", "rl"], cfg) == ["sand", "sand", "sand", "rl"]
    assert expand(["il", "rl"], cfg) == ["il", "rl"]


class _AlwaysExpert:
    """A policy whose every sample is the state's expert action (the sampling request names it to exclude)."""

    name = "always-expert"

    def generate(self, requests, n, sampling, seed):
        return [[f"<action>{r.exclude[0]}</action>"] * n for r in requests]


@pytest.mark.heavy
@pytest.mark.slow
def test_build_on_real_scienceworld_states(sw_experts, tmp_path):
    cfg = _cfg(tmp_path, "sand.candidates=2")  # 3 roll-ons a state (fresh JVMs), not 4: the same checks, 3/4 the time
    policy = ScriptedPolicy()
    summary = build_sand(cfg, sw_experts, policy, tmp_path / "sand", workers=2, progress=False)
    records = read_deliberations(summary.out)
    trajs = {t.trajectory_id: t for t in read_jsonl(sw_experts, Trajectory)}
    assert len(records) == sum(len(t.steps) for t in trajs.values()) == summary.counts["states"]
    rollouts = {r.episode_id: r for r in read_jsonl(tmp_path / "sand" / "rollouts.jsonl", EpisodeRecord)}
    expert_places = set()
    for r in records:
        traj = trajs[r.trajectory_id]
        assert r.reason not in ("rollout_failed", "no_candidate", "all_expert"), r  # random samples: never the expert
        mine = [c for c in r.candidates if c.source == "expert"]
        others = [c for c in r.candidates if c.source == "policy"]
        assert len(mine) == 1 and 1 <= len(others) <= 2
        assert all(c.action.lower() != r.expert_action.lower() for c in others)
        expert_places.add(r.candidates.index(mine[0]))
        for c in r.candidates:
            roll = rollouts[c.episode_id]
            assert roll.steps[0]["action"] == c.action and roll.steps[0]["branched"]
            assert c.n_steps == len(roll.steps) <= 1 + 2  # the candidate, then at most sand.rollout_steps
            assert c.score == roll.max_score and c.critique.startswith("It led to: ")
            if len(roll.steps) > 1:  # the policy played on with the replayed prefix and the candidate in its history
                assert f"Action: {c.action}" in roll.steps[1]["prompt"]
        # the roll-on started from the restored state: the expert action's outcome is the recorded next observation
        if r.index + 1 < len(traj.steps):
            assert sorted(_words(mine[0].steps[0][1])) == sorted(_words(traj.steps[r.index + 1].observation))
        want = kind_of(r.state_id)
        assert r.reason == want or (want == "narrates_outcome" and r.reason == "kept"), (r.reason, want, r)
        assert r.kept == (r.reason == "kept")
    assert len(expert_places) > 1  # the expert's place among the critiques varies
    counts = read_manifest(summary.out)["counts"]
    assert counts == summary.counts and counts["kept"] == sum(r.kept for r in records) > 0
    assert counts["rollout_env_steps"] == sum(len(r.steps) for r in rollouts.values())
    assert counts["critiques"] == sum(len(r.candidates) for r in records) == len(rollouts)
    assert {kind_of(r.state_id) for r in records} - {"kept", "narrates_outcome"} <= set(counts["dropped"])
    rows = sand_rows(records, list(trajs.values()), cfg)
    assert len(rows) == len(records)
    for r, row in zip(records, rows, strict=True):
        target = row["completion"][0]["content"]
        assert target.endswith(wrap_action(r.expert_action))
        assert target.startswith(r.deliberation.split("\n")[0]) == r.kept
    # a finished build with the same parameters is reused: nothing is generated again
    again = ScriptedPolicy()
    assert build_sand(cfg, sw_experts, again, tmp_path / "sand", 2, False).counts == summary.counts
    assert again.reflection_calls == again.critique_calls == 0


@pytest.mark.heavy
@pytest.mark.slow
def test_a_state_whose_samples_all_equal_the_expert_gets_no_deliberation(sw_experts, tmp_path):
    cfg = _cfg(tmp_path)
    summary = build_sand(cfg, sw_experts, _AlwaysExpert(), tmp_path / "sand", workers=1, progress=False)
    records = read_deliberations(summary.out)
    assert records and all(r.reason == "all_expert" and not r.candidates for r in records)
    assert summary.counts["dropped"] == {"all_expert": len(records)} and summary.counts["rollout_env_steps"] == 0
    assert not (tmp_path / "sand" / "rollouts.jsonl").exists()  # nothing was rolled on
    trajs = list(read_jsonl(sw_experts, Trajectory))
    assert sand_rows(records, trajs, cfg) == il_rows(trajs, cfg)


@pytest.mark.heavy
@pytest.mark.slow
def test_sand_rl_pipeline_with_two_iterations_on_the_local_engine(tiny_model_dir, sw_experts, tmp_path, monkeypatch):
    """`pipeline=sand_rl`, `sand.iterations=2`, on the tiny model: each SAND round builds its data right
    before its stage, sampled by the checkpoint that stage starts from (round 2: round 1's), critiqued by
    the frozen initial policy; then RL. The plan lists both data steps."""
    import nemo_act.generation
    from nemo_act.run.pipeline import PipelineRunner

    asked = []

    def make(policy, cfg, *args, **kwargs):
        asked.append(str(policy))
        return ScriptedPolicy()

    monkeypatch.setattr(nemo_act.generation, "make_generator", make)
    cfg = load_config(
        REPO / "conf" / "pipeline" / "sand_rl.yaml",
        [
            f"pipeline.init={tiny_model_dir}", "pipeline.experts.tasks=[lifespan-longest-lived]",
            "pipeline.experts.split=test", "pipeline.experts.max_variations=1", "pipeline.eval.stages=none",
            "train=demo", "train.il.max_steps=2", "train.rl.max_steps=1", "train.rl.batch_size=8",
            "train.rl.num_generations=8", "sand.candidates=2", "sand.rollout_steps=1", "sand.iterations=2",
            "benchmark.max_admissible_shown=8",  # short prompts: the data flow is checked, not their length
            f"run_dir={tmp_path / 'run'}",
        ],
    )  # fmt: skip
    runner = PipelineRunner(cfg)
    steps = plan(runner)
    assert [r["step"] for r in steps][:3] == ["experts", "sand", "train sand"]
    assert [r["step"] for r in steps].count("sand") == 2
    log = runner.run()
    assert [s["stage"] for s in log["stages"]] == ["01_sand", "02_sand", "03_rl"]
    first = runner.dir / "stages" / "01_sand"
    assert asked == [str(tiny_model_dir), str(first), str(tiny_model_dir)]  # round 2: round 1's checkpoint samples
    for stage in ("01_sand", "02_sand"):
        audit = runner.data_dir / "sand" / stage / "deliberations.jsonl"
        counts = read_manifest(audit)["counts"]
        info = json.loads((runner.dir / "stages" / stage / "stage.json").read_text())
        assert info["complete"] and info["rows"] == counts["states"] > 0  # one row per expert state
        assert set(counts["dropped"]) <= set(KINDS) | {"no_action_tag"}


@pytest.mark.heavy
@pytest.mark.slow
def test_cluster_mode_builds_a_round_in_a_child_process_with_the_same_result(sw_experts, tmp_path):
    """On the cluster engine a round's data step runs in the generation interpreter (`python -m
    nemo_act.run.pipeline ... baseline_data sand EXPERTS POLICY STAGE`, so vLLM's memory goes back before the
    next training job); its audit file is the in-process one, in the round's own folder."""
    from nemo_act.run.pipeline import PipelineRunner

    cfg = load_config(overrides=["pipeline.init=random", "sand.candidates=2", "sand.rollout_steps=1",
                                 "pipeline.eval.workers=1"])  # fmt: skip
    shortest = min(read_jsonl(sw_experts, Trajectory), key=lambda t: len(t.steps))  # the same path, half the env
    experts = tmp_path / "experts.jsonl"
    experts.write_text(shortest.model_dump_json() + "\n")
    outs = []
    for isolate in (True, False):
        runner = PipelineRunner(cfg, tmp_path / f"run_{isolate}")
        runner.isolate = isolate
        outs.append(runner.baseline_data("sand", experts, "random", "01_sand"))
    assert outs[0].relative_to(tmp_path / "run_True") == Path("data/sand/01_sand/deliberations.jsonl")
    assert outs[1].relative_to(tmp_path / "run_False") == Path("data/sand/01_sand/deliberations.jsonl")
    assert outs[0].read_text() == outs[1].read_text() and outs[0].read_text()


@pytest.mark.heavy
@pytest.mark.slow
def test_cli_builds_with_the_tiny_model_as_the_critic(tiny_model_dir, sw_experts, tmp_path):
    """`nemo-act reflection sand` with the random policy sampling and rolling on and a real (tiny, untrained)
    model writing every critique and deliberation: each state is audited, each candidate critiqued, and the
    printout gives kept / none-for counts per reason."""
    import os
    import subprocess
    import sys

    trajs = sorted(read_jsonl(sw_experts, Trajectory), key=lambda t: len(t.steps))
    experts = tmp_path / "experts.jsonl"
    experts.write_text(trajs[0].model_dump_json() + "\n")
    cmd = [
        sys.executable, "-m", "nemo_act.cli", "reflection", "sand", "--experts", str(experts), "--policy", "random",
        "--critic", str(tiny_model_dir), "--out", str(tmp_path / "sand"), "--workers", "1", "sand.candidates=2",
        "sand.rollout_steps=1", "sand.critic_sampling.max_new_tokens=24",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_deliberations(tmp_path / "sand" / "deliberations.jsonl")
    assert len(records) == len(trajs[0].steps)
    assert all(r.deliberation is not None and 2 <= len(r.candidates) <= 3 for r in records)
    assert all(c.critique is not None for r in records for c in r.candidates)
    counts = read_manifest(tmp_path / "sand" / "deliberations.jsonl")["counts"]
    assert f"{counts['kept']} of {len(records)} deliberations kept" in proc.stdout and "none for: " in proc.stdout
    assert read_manifest(tmp_path / "sand" / "deliberations.jsonl")["params"]["critic"] == str(tiny_model_dir)


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.repeat(
    "tests/test_early_experience.py::test_kill_9_mid_build_resumes_without_duplicates_or_gaps",  # ResumableStep
    "tests/test_eval_repeats.py::test_a_killed_env_worker_or_a_ctrl_c_and_rerun_give_the_uninterrupted_episodes",
)
def test_kill_9_during_roll_on_resumes_without_duplicates_or_gaps(sw_experts, tmp_path):
    """A build killed with SIGKILL while it rolls candidates on resumes where it stopped: the finished
    roll-ons are kept as written (not played again), every roll-on is in the file once, and the audit file
    equals an uninterrupted build's."""
    import os
    import signal
    import subprocess
    import sys
    import time

    overrides = ["sand.candidates=2", "sand.envs_per_worker=1", "sand.rollout_steps=2"]
    script = tmp_path / "build.py"
    script.write_text(
        "import sys\n"
        "from scripted_policy import ScriptedPolicy\n"
        "from nemo_act.config.load import load_config\n"
        "from nemo_act.reflection.sand import build_sand\n"
        "if __name__ == '__main__':  # the env pool spawns workers that import this file\n"
        f"    cfg = load_config(overrides={overrides!r})\n"
        "    build_sand(cfg, sys.argv[1], ScriptedPolicy(), sys.argv[2], 1, progress=False)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'tests'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    trajs = sorted(read_jsonl(sw_experts, Trajectory), key=lambda t: len(t.steps))
    experts = tmp_path / "experts.jsonl"
    experts.write_text(trajs[0].model_dump_json() + "\n")
    folder = tmp_path / "sand"
    proc = subprocess.Popen([sys.executable, str(script), str(experts), str(folder)], env=env)
    partial = folder / "rollouts.jsonl.partial"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if partial.exists() and len(partial.read_text().splitlines()) >= 1:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "the build finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = partial.read_text().splitlines()
    cfg = load_config(overrides=overrides)
    resumed = read_deliberations(build_sand(cfg, experts, ScriptedPolicy(), folder, 1, progress=False).out)
    lines = (folder / "rollouts.jsonl").read_text().splitlines()
    assert lines[: len(before)] == before  # kept as written
    keys = [json.loads(line)["episode_id"] for line in lines]
    assert len(keys) == len(set(keys)) == sum(len(r.candidates) for r in resumed)
    fresh = read_deliberations(build_sand(cfg, experts, ScriptedPolicy(), tmp_path / "fresh", 1, progress=False).out)
    assert [r.model_dump() for r in resumed] == [r.model_dump() for r in fresh]
    assert not list(folder.glob("*.partial"))


def test_a_baseline_stage_without_rows_stops_and_names_its_file(tmp_path):
    """Early Experience with every reflection dropped (what the untrained tiny model writes) has no rows
    to train on: the stage stops before training and names the audit file whose counts say why."""
    from nemo_act.data.manifest import write_manifest
    from nemo_act.reflection.early_experience import ReflectionRecord
    from nemo_act.run.pipeline import PipelineRunner

    expert = _expert()
    experts = tmp_path / "experts.jsonl"
    experts.write_text(expert.model_dump_json() + "\n")
    audit = tmp_path / "reflections.jsonl"
    dropped = ReflectionRecord(state_id=f"{expert.trajectory_id}/0", trajectory_id=expert.trajectory_id, index=0,
                               expert_action="go to hallway", candidates=[], reflection="<action>x</action>",
                               kept=False, reason="concludes_other")  # fmt: skip
    audit.write_text(dropped.model_dump_json() + "\n")
    write_manifest(audit, "early_experience", params={}, counts={"kept": 0}, inputs={"experts": experts})
    runner = PipelineRunner(load_config(overrides=[f"run_dir={tmp_path / 'run'}"]))
    with pytest.raises(ValueError, match=rf"stage 01_ee: {audit} gives no training rows"):
        runner.run_stage(1, "ee", "random", {"early_experience": audit})
