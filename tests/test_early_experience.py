"""Early Experience data on the benchmark protocol: alternatives, env branching, reflections, filters, rows.

The builder runs on real ScienceWorld gold states (JVM); alternatives come from the real random policy and
the reflections from a scripted writer (``tests/scripted_policy.py``) whose answers are made to hit each
filter, plus the tiny model for the wiring of a real writer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scripted_policy import KINDS, ScriptedPolicy, kind_of

from nemo_act.config.load import load_config
from nemo_act.data.io import read_jsonl
from nemo_act.data.manifest import read_manifest
from nemo_act.data.records import Trajectory
from nemo_act.generation.simple import wrap_action
from nemo_act.kinds.reflection import ee_rows, world_model_rows
from nemo_act.reflection.early_experience import (
    build_early_experience,
    choose_alternatives,
    judge,
    read_reflections,
)
from nemo_act.run.plan import plan

REPO = Path(__file__).resolve().parents[1]


def _words(text: str) -> list[str]:
    return " ".join(text.lower().split()).split()


def _lines(text: str) -> list[str]:
    """An observation's lines in any order: ScienceWorld lists a room's objects in an order that follows the JVM
    (its options and build: tests/assets/make_assets.py), as the benchmark protocol's restore allows."""
    return sorted(" ".join(line.split()) for line in text.splitlines() if line.strip())


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The door is shut, so opening it comes first. <action>open door</action>", "kept"),
        ("I should look around. <action>look around</action>", "concludes_other"),
        ("no tag here", "no_action_tag"),
        ("<action>open door</action>", "empty"),
        ("An expert opens doors first. <action>open door</action>", "says_expert"),
        ("Option 1 wastes a move; the other helps. <action>open door</action>", "candidate_label"),
        ("The second action wastes a move. <action>open door</action>", "candidate_label"),
        ("It reveals that the hallway has a red door and a blue door inside. <action>open door</action>",
         "narrates_outcome"),
        ("You are in the kitchen with a table and a chair and a lamp. <action>open door</action>", "kept"),
    ],
)  # fmt: skip
def test_judge_keeps_clean_reflections_and_names_why_others_go(text, reason):
    """The last two differ only in where the quoted words come from: the expert's outcome (narrating what
    it was shown) or the state it had anyway (fine)."""
    outcome = "The door opens. It reveals that the hallway has a red door and a blue door inside."
    state = "You are in the kitchen with a table and a chair and a lamp. A closed door leads east."
    assert judge(text, "open door", outcome, state, 8)[0] == reason


def test_alternatives_come_from_the_policy_then_the_admissible_list():
    steps = [
        {"observation": "o", "action": "go east", "admissible_actions": ["go east", "go west", "look", "wait", "eat"],
         "action_admissible": True},
    ]  # fmt: skip
    traj = Trajectory.model_validate(
        {"trajectory_id": "t/x/0", "benchmark": "scienceworld", "task_id": "x", "split": "train",
         "task_description": "d", "steps": steps, "score": 100, "success": True, "source": "test"}
    )  # fmt: skip
    samples = ["<action>go west</action>", "<action>GO EAST</action>", "junk", "<action>go west.</action>"]
    alts = choose_alternatives(traj, 0, samples, 3, seed=0)
    assert [a.source for a in alts] == ["policy", "admissible", "admissible"]
    assert alts[0].action == "go west" and len({a.action for a in alts}) == 3
    assert "go east" not in {a.action for a in alts}  # the expert, in any spelling, is never an alternative
    assert alts == choose_alternatives(traj, 0, samples, 3, seed=0)  # seeded per state
    assert len(choose_alternatives(traj, 0, [], 10, seed=0)) == 4  # all there is


def _cfg(tmp_path, *extra):
    return load_config(
        overrides=["early_experience.chunk=4", "early_experience.k=2", f"run_dir={tmp_path / 'run'}", *extra]
    )


@pytest.mark.heavy
@pytest.mark.slow
def test_build_on_real_scienceworld_states(sw_experts, tmp_path):
    cfg = _cfg(tmp_path)
    policy = ScriptedPolicy()
    summary = build_early_experience(cfg, sw_experts, policy, tmp_path / "ee", workers=2, progress=False)
    records = read_reflections(summary.out)
    trajs = {t.trajectory_id: t for t in read_jsonl(sw_experts, Trajectory)}
    assert len(records) == sum(len(t.steps) for t in trajs.values()) == summary.counts["states"]
    expert_places = set()
    for r in records:
        traj = trajs[r.trajectory_id]
        expert = [c for c in r.candidates if c.source == "expert"]
        alts = [c for c in r.candidates if c.source != "expert"]
        assert len(expert) == 1 and len(alts) == 2 and r.reason != "branch_failed", r
        assert all(a.action.lower() != r.expert_action.lower() for a in alts)
        expert_places.add(r.candidates.index(expert[0]))
        # branching replays the prefix: the expert action's outcome is the recorded next observation
        if r.index + 1 < len(traj.steps):
            assert _lines(expert[0].observation) == _lines(traj.steps[r.index + 1].observation)
        want = kind_of(r.state_id)
        if want == "narrates_outcome" and len(_words(expert[0].observation)) < 8:
            want = "kept"  # too short an outcome to quote 8 words of
        assert r.reason == want or (want == "narrates_outcome" and r.reason == "kept"), (r.reason, want, r)
        assert r.kept == (r.reason == "kept")
    assert len(expert_places) > 1  # the expert's place among the outcomes varies
    counts = read_manifest(summary.out)["counts"]
    assert counts == summary.counts and counts["kept"] == sum(r.kept for r in records)
    assert sum(counts["dropped"].values()) == len(records) - counts["kept"]
    scripted = {kind_of(r.state_id) for r in records} - {"kept", "narrates_outcome"}
    assert scripted and scripted <= set(counts["dropped"])
    # rows: each kept reflection then the expert action, plus as many plain expert rows
    rows = ee_rows(records, list(trajs.values()), cfg)
    kept = [r for r in records if r.kept]
    assert len(rows) == 2 * len(kept)
    targets = [row["completion"][0]["content"] for row in rows[: len(kept)]]
    for r, target in zip(kept, targets, strict=True):
        assert target.endswith(wrap_action(r.expert_action)) and target.startswith(r.reflection.split("\n")[0])
    wm = world_model_rows(records, list(trajs.values()), cfg)
    assert counts["executed"] == 3 * len(records)  # the expert and 2 alternatives at every state
    assert len(wm) == counts["executed"] + min(counts["executed"], len(records))  # + plain expert rows (all there are)
    assert 'If the next action is "' in wm[0]["prompt"][0]["content"]
    # a finished build with the same parameters is reused: nothing is generated again
    again = ScriptedPolicy()
    assert build_early_experience(cfg, sw_experts, again, tmp_path / "ee", 2, False).counts == summary.counts
    assert again.reflection_calls == 0


@pytest.mark.heavy
@pytest.mark.slow
def test_kill_9_mid_build_resumes_without_duplicates_or_gaps(sw_experts, tmp_path):
    """A build killed with SIGKILL while it writes reflections resumes where it stopped: every state once,
    in state order, the same records as an uninterrupted build."""
    script = tmp_path / "build.py"
    script.write_text(
        "import sys\n"
        "from scripted_policy import ScriptedPolicy\n"
        "from nemo_act.config.load import load_config\n"
        "from nemo_act.reflection.early_experience import build_early_experience\n"
        "if __name__ == '__main__':  # the env pool spawns workers that import this file\n"
        "    cfg = load_config(overrides=['early_experience.chunk=1', 'early_experience.k=2'])\n"
        "    build_early_experience(cfg, sys.argv[1], ScriptedPolicy(delay=3.0), sys.argv[2], 2, progress=False)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'tests'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    trajs = sorted(read_jsonl(sw_experts, Trajectory), key=lambda t: len(t.steps))
    experts = tmp_path / "experts.jsonl"  # the shorter gold trajectory: each state costs 3 fresh JVM replays
    experts.write_text(trajs[0].model_dump_json() + "\n")
    folder = tmp_path / "ee"
    proc = subprocess.Popen([sys.executable, str(script), str(experts), str(folder)], env=env)
    partial = folder / "reflections.jsonl.partial"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if partial.exists() and len(partial.read_text().splitlines()) >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the build finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(partial.read_text().splitlines())
    cfg = load_config(overrides=["early_experience.chunk=1", "early_experience.k=2"])
    policy = ScriptedPolicy()
    resumed = read_reflections(build_early_experience(cfg, experts, policy, folder, 2, progress=False).out)
    states = len(trajs[0].steps)
    assert policy.reflection_calls <= states - done_before + 1  # the done states are not asked again
    assert len(resumed) == len({r.state_id for r in resumed}) == states
    fresh = build_early_experience(cfg, experts, ScriptedPolicy(), tmp_path / "fresh", 2, progress=False)
    fresh = read_reflections(fresh.out)
    assert [(r.state_id, r.reason) for r in resumed] == [(r.state_id, r.reason) for r in fresh]
    assert not list(folder.glob("*.partial"))


@pytest.mark.heavy
@pytest.mark.slow
def test_ee_rl_pipeline_runs_end_to_end_on_the_local_engine(tiny_model_dir, sw_experts, tmp_path, monkeypatch):
    """`pipeline=ee_rl`: experts -> Early Experience data (scripted writer in place of the initial policy's
    reflections) -> SFT on reflections + expert rows -> RL, on the tiny model; the runner builds the data
    step its stages need and the plan lists it."""
    import nemo_act.generation
    from nemo_act.run.pipeline import PipelineRunner

    monkeypatch.setattr(nemo_act.generation, "make_generator", lambda policy, cfg, *args, **kwargs: ScriptedPolicy())
    cfg = load_config(
        REPO / "conf" / "pipeline" / "ee_rl.yaml",
        [
            f"pipeline.init={tiny_model_dir}", "pipeline.experts.tasks=[lifespan-longest-lived]",
            "pipeline.experts.split=test", "pipeline.experts.max_variations=1", "pipeline.eval.stages=none",
            "train=demo", "train.il.max_steps=2", "train.rl.max_steps=1", "train.rl.batch_size=8",
            "train.rl.num_generations=8", "early_experience.k=2", f"run_dir={tmp_path / 'run'}",
            "benchmark.max_admissible_shown=8",  # short prompts: the data flow is checked, not their length
        ],
    )  # fmt: skip
    runner = PipelineRunner(cfg)
    steps = [r["step"] for r in plan(runner)]
    assert steps[:2] == ["experts", "early_experience"] and "pairs" not in steps
    log = runner.run()
    assert [s["stage"] for s in log["stages"]] == ["01_ee", "02_rl"]
    counts = read_manifest(runner.data_dir / "early_experience" / "reflections.jsonl")["counts"]
    info = json.loads((runner.dir / "stages" / "01_ee" / "stage.json").read_text())
    assert info["complete"] and info["rows"] == 2 * counts["kept"] > 0
    assert set(counts["dropped"]) <= set(KINDS) | {"no_action_tag"}


@pytest.mark.heavy
@pytest.mark.slow
def test_cli_builds_with_the_tiny_model_as_the_writer(tiny_model_dir, sw_experts, tmp_path):
    """`nemo-act reflection ee` with a real (tiny, untrained) model sampling alternatives and writing the
    reflections: every state is executed and audited, and the printout gives kept/dropped per reason."""
    trajs = sorted(read_jsonl(sw_experts, Trajectory), key=lambda t: len(t.steps))
    experts = tmp_path / "experts.jsonl"
    experts.write_text(trajs[0].model_dump_json() + "\n")
    cmd = [
        sys.executable, "-m", "nemo_act.cli", "reflection", "ee", "--experts", str(experts),
        "--policy", str(tiny_model_dir), "--out", str(tmp_path / "ee"), "--workers", "1",
        "early_experience.k=2", "early_experience.sampling.max_new_tokens=16",
        "early_experience.reflection_sampling.max_new_tokens=24",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_reflections(tmp_path / "ee" / "reflections.jsonl")
    assert len(records) == len(trajs[0].steps)
    assert all(r.reflection is not None and len(r.candidates) == 3 for r in records)  # 2 topped-up alternatives
    assert all(c.observation is not None for r in records for c in r.candidates)
    counts = read_manifest(tmp_path / "ee" / "reflections.jsonl")["counts"]
    assert f"{counts['kept']} of {len(records)} reflections kept" in proc.stdout and "dropped: " in proc.stdout
