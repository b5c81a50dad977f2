"""Agent-R as the ACT paper describes it: first deviation of a policy rollout, revision rows, the builder.

The first-deviation and row tests use constructed rollouts (no env); the builder runs the real random and
gold policies in real ScienceWorld episodes of the gold experts.
"""

from __future__ import annotations

import pytest

from nemo_act.config.load import load_config
from nemo_act.data.io import read_jsonl
from nemo_act.data.manifest import read_manifest
from nemo_act.data.records import Trajectory
from nemo_act.data.resumable import ResumableStep
from nemo_act.generation.simple import wrap_action
from nemo_act.kinds.imitation import il_rows
from nemo_act.kinds.reflection import agent_r_rows
from nemo_act.reflection.agent_r import build_agent_r, first_deviation, read_revisions, revise
from nemo_act.run.plan import plan

ROOMS = ["kitchen", "hallway", "workshop", "greenhouse"]


def _expert() -> Trajectory:
    steps = [
        {"observation": f"You are in the {ROOMS[j]}.", "action": f"go to {ROOMS[j + 1]}",
         "admissible_actions": [f"go to {r}" for r in ROOMS] + ["look around"], "action_admissible": True}
        for j in range(3)
    ]  # fmt: skip
    return Trajectory.model_validate(
        {"trajectory_id": "scienceworld/walk/0", "benchmark": "scienceworld", "task_id": "walk", "variation": 0,
         "split": "train", "task_description": "Walk to the greenhouse.", "steps": steps, "score": 100.0,
         "success": True, "source": "test"}
    )  # fmt: skip


def _rollout(*pairs: tuple[str, str]) -> list[dict]:
    return [{"action": a, "observation": o} for a, o in pairs]


def test_first_deviation_is_found_on_constructed_rollouts():
    expert = _expert()
    follows = [s.action for s in expert.steps]
    assert first_deviation(expert, follows) is None
    spelled = ["Go To Hallway.", "go to kitchen", "go to greenhouse"]
    assert first_deviation(expert, spelled) == 1  # another spelling of the expert's action is no deviation
    assert first_deviation(expert, ["look around"]) == 0
    assert first_deviation(expert, follows[:1]) is None  # a rollout cut short never left the path
    # a different action that reaches the expert's next state is no deviation; one that does not, is
    same_state = ["walk to hallway", "go to workshop", "go to kitchen"]
    seen = ["You are in the hallway.", "You are in the workshop.", "You are in the kitchen."]
    assert first_deviation(expert, same_state, seen) == 2
    assert first_deviation(expert, same_state) == 0


def test_revision_rows_train_only_the_revision_and_the_corrected_turns():
    """The wrong action appears only in a prompt's history, never as a target; the revision row's target is
    the revision turn then the expert's action at the branching state; every expert state keeps its row."""
    cfg = load_config()
    expert = _expert()
    rec = revise(
        expert,
        _rollout(("go to hallway", "You are in the hallway."), ("look around", "The hallway is empty. A door leads.")),
        error_steps=1, max_chars=200,
    )  # fmt: skip
    assert rec.kept and rec.deviation == 1 and [w.action for w in rec.wrong] == ["look around"]
    assert rec.wrong[0].observation == expert.steps[1].observation  # it acted on the expert's state
    assert "look around" in rec.revision and '"go to workshop"' in rec.revision
    assert "The hallway is empty" in rec.revision
    rows = agent_r_rows([rec], [expert], cfg)
    assert len(rows) == 1 + len(expert.steps)
    revision = rows[0]
    assert revision["completion"][0]["content"] == f"{rec.revision}\n{wrap_action('go to workshop')}"
    prompt = revision["prompt"][0]["content"]
    assert "Action: look around" in prompt and "The hallway is empty. A door leads." in prompt
    targets = [r["completion"][0]["content"] for r in rows]
    assert not any(t.endswith(wrap_action("look around")) for t in targets)  # the wrong turn is never a target
    assert targets[1:] == [wrap_action(s.action) for s in expert.steps]
    follows = revise(expert, _rollout(*((s.action, "x") for s in expert.steps)), 1, 200)
    assert not follows.kept and follows.reason == "followed_expert"
    assert agent_r_rows([follows], [expert], cfg) == il_rows([expert], cfg)


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.parametrize("policy", ["random", "gold"])
def test_builder_on_real_scienceworld_episodes(sw_experts, tmp_path, policy):
    """Rollouts of the real env from each expert episode's start: the gold policy never deviates; the random
    one does, and the revision's first wrong step acted on the expert's recorded state."""
    from nemo_act.generation import make_generator

    cfg = load_config(overrides=[f"run_dir={tmp_path}", "agent_r.envs_per_worker=1"])
    summary = build_agent_r(cfg, sw_experts, make_generator(policy, cfg), tmp_path / "ar", workers=2, progress=False)
    records = read_revisions(summary.out)
    trajs = {t.trajectory_id: t for t in read_jsonl(sw_experts, Trajectory)}
    assert len(records) == len(trajs) == summary.counts["episodes"]
    assert read_manifest(summary.out)["counts"] == summary.counts
    if policy == "gold":
        assert summary.counts["kept"] == 0 and summary.counts["dropped"] == {"followed_expert": len(trajs)}
        return
    assert summary.counts["kept"] == len(trajs)
    for r in records:
        traj = trajs[r.trajectory_id]
        assert r.deviation is not None and r.rollout_actions[r.deviation] != traj.steps[r.deviation].action
        assert r.wrong[0].observation == traj.steps[r.deviation].observation


@pytest.mark.heavy
@pytest.mark.slow
def test_agent_r_rl_pipeline_runs_end_to_end_on_the_local_engine(tiny_model_dir, sw_experts, tmp_path, monkeypatch):
    """`pipeline=agent_r_rl` on the tiny model: experts -> rollouts (the random policy in place of the tiny
    model, which cannot yet act) -> revisions -> SFT on revision + expert rows -> RL."""
    import json
    from pathlib import Path

    import nemo_act.generation
    from nemo_act.generation.simple import RandomGenerator
    from nemo_act.run.pipeline import PipelineRunner

    monkeypatch.setattr(nemo_act.generation, "make_generator", lambda policy, cfg, *args, **kwargs: RandomGenerator())
    cfg = load_config(
        Path(__file__).resolve().parents[1] / "conf" / "pipeline" / "agent_r_rl.yaml",
        [
            f"pipeline.init={tiny_model_dir}", "pipeline.experts.tasks=[lifespan-longest-lived]",
            "pipeline.experts.split=test", "pipeline.experts.max_variations=1", "pipeline.eval.stages=none",
            "train=demo", "train.il.max_steps=2", "train.rl.max_steps=1", "train.rl.batch_size=8",
            "agent_r.envs_per_worker=1", f"run_dir={tmp_path / 'run'}",
            "benchmark.max_admissible_shown=8",  # short prompts: the data flow is checked, not their length
        ],
    )  # fmt: skip
    runner = PipelineRunner(cfg)
    assert [r["step"] for r in plan(runner)][:2] == ["experts", "agent_r"]
    log = runner.run()
    assert [s["stage"] for s in log["stages"]] == ["01_agent_r", "02_rl"]
    counts = read_manifest(runner.data_dir / "agent_r" / "revisions.jsonl")["counts"]
    experts = list(read_jsonl(runner.data_dir / "experts.jsonl", Trajectory))
    info = json.loads((runner.dir / "stages" / "01_agent_r" / "stage.json").read_text())
    assert counts["kept"] == len(experts) and info["rows"] == counts["kept"] + sum(len(t.steps) for t in experts)


def test_a_new_build_clears_the_last_one_and_an_unfinished_one_keeps_its_parameters(tmp_path):
    """A build folder never mixes two builds: a new one removes the old rollouts and files, and resuming with
    other parameters is refused."""

    folder, out = tmp_path / "ar", tmp_path / "ar" / "revisions.jsonl"

    def step(policy: str, leftovers: tuple[str, ...] = ("rollouts",)) -> ResumableStep:
        return ResumableStep.in_folder(folder, out, "agent_r", {"policy": policy}, leftovers)

    (folder / "rollouts").mkdir(parents=True)
    (folder / "rollouts" / "episodes.jsonl").write_text("{}\n")  # another policy's, from a finished build
    out.write_text("{}\n")
    step("a", ("rollouts", "revisions.jsonl")).begin()
    assert not (folder / "rollouts").exists() and not out.exists()
    (folder / "rollouts").mkdir()
    step("a").begin()  # resumes: what the unfinished build made stays
    assert (folder / "rollouts").exists()
    with pytest.raises(ValueError, match=r"unfinished run with other parameters \(policy\)"):
        step("b").begin()
    out.write_text("{}\n")
    step("a").finish({"kept": 1})
    assert step("a").reused().counts == {"kept": 1} and step("b").reused() is None
    step("b").begin()  # the last build finished: a new one starts
