"""ScienceWorld adapter on the real simulator (pip package `scienceworld`, Java)."""

import json
import os

import pytest

from nemo_act.benchmarks.scienceworld import find_alias, list_episodes, make_env, replay_actions
from nemo_act.config import load_config
from nemo_act.data import Trajectory, read_jsonl, read_manifest

TEMPLATES = ["focus on OBJ", "use OBJ on OBJ", "move OBJ to OBJ", "connect OBJ to OBJ", "open OBJ", "look around"]


@pytest.mark.parametrize(
    ("gold", "valid", "alias"),
    [  # spellings seen in real gold paths and valid lists
        ("focus on thermometer in inventory", ["focus on inventory", "focus on thermometer"], "focus on thermometer"),
        (
            "use thermometer in inventory on unknown substance B in inventory",
            ["use thermometer on inventory", "use thermometer on unknown substance", "use thermometer on thermometer"],
            "use thermometer on unknown substance",
        ),
        (
            "use thermometer in inventory on substance in metal pot",
            ["use thermometer on metal pot", "use thermometer on substance in metal pot"],
            "use thermometer on substance in metal pot",
        ),
        (
            "move unknown substance B in inventory to purple box",
            ["move purple box to inventory", "move unknown substance to purple box"],
            "move unknown substance to purple box",
        ),
        (
            "connect battery anode to black wire terminal 1",
            ["connect anode in battery to black wire terminal 1", "connect black wire terminal 1 to anode in battery"],
            "connect anode in battery to black wire terminal 1",
        ),
        ("Look around.", ["look around"], "look around"),
        ("open door to kitchen", ["open cupboard", "go to kitchen"], None),  # nothing the same: no alias
        ("focus on red box", ["focus on box", "focus on red"], None),  # two equally good: ambiguous
        (  # the pot alone must never stand for the tree in it
            "focus on lemon tree in the adult stage in self watering flower pot 5",
            ["focus on self watering flower pot 5", "focus on lemon tree in self watering flower pot 1"],
            None,
        ),
        (  # a part of the tree (its flower) must not stand for the tree; "adult orange tree" may
            "focus on orange tree in the reproducing stage in self watering flower pot 6",
            ["focus on flower in orange tree in the reproducing stage", "focus on reproducing orange tree"],
            "focus on reproducing orange tree",
        ),
        (
            "focus on orange tree in the adult stage in self watering flower pot 9",
            ["focus on adult orange tree", "focus on self watering flower pot 9"],
            "focus on adult orange tree",
        ),
        (
            "focus on lemon tree in the reproducing stage in self watering flower pot 5",
            ["focus on self watering flower pot 5", "focus on lemon tree in self watering flower pot 5"],
            "focus on lemon tree in self watering flower pot 5",
        ),
    ],
)
def test_find_alias(gold, valid, alias):
    assert find_alias(gold, valid, TEMPLATES) == alias


@pytest.mark.heavy
def test_test_split_has_the_protocols_149_episodes(scienceworld, cfg):
    env = make_env(cfg.benchmark)
    try:
        episodes = list_episodes(env, "test", 5, simplification=cfg.benchmark.simplification)
    finally:
        env.close()
    assert len(episodes) == 149 and len({t for t, _ in episodes}) == 30
    assert sum(1 for t, _ in episodes if t == "identify-life-stages-2") == 4


@pytest.mark.heavy
def test_unknown_split_and_task_are_rejected(scienceworld, cfg):
    env = make_env(cfg.benchmark)
    try:
        with pytest.raises(ValueError, match="unknown ScienceWorld split 'val'"):
            list_episodes(env, "val", 1)
        with pytest.raises(ValueError, match="unknown ScienceWorld task"):
            list_episodes(env, "test", 1, tasks=["boil-eggs"])
    finally:
        env.close()


@pytest.mark.heavy
def test_the_committed_experts_are_what_a_collection_makes(scienceworld, tmp_path):
    """The ``sw_experts`` asset (tests/assets/make_assets.py) is what the script makes now, byte for byte, with
    the same parameters and counts in its manifest: a change to the adapter or the simulator shows here first.

    Made and compared under the tests' JIT and GC options (tests/conftest.py), which with HotSpot's default identity
    hash reordered a room's objects and the gold path's choices; ``benchmark.jvm_options`` keeps the order. Only on
    the JDK that made it (another JDK's collections are untested here); elsewhere
    :func:`test_gold_experts_replay_to_100` still checks the asset replays to 100 on this JVM.
    """
    import sys

    from conftest import SW_EXPERTS

    sys.path.insert(0, str(SW_EXPERTS.parent))
    try:
        from make_assets import java_version, make_sw_experts
    finally:
        sys.path.remove(str(SW_EXPERTS.parent))
    made_on = SW_EXPERTS.with_name("sw_experts.java.txt").read_text().strip()
    if java_version() != made_on:
        pytest.skip(f"the asset was made on {made_on!r}, this is {java_version()!r}: other gold paths may come out")
    fresh = make_sw_experts(tmp_path / SW_EXPERTS.name)
    assert fresh.read_bytes() == SW_EXPERTS.read_bytes(), "re-run tests/assets/make_assets.py and say why"
    mine, theirs = read_manifest(fresh), read_manifest(SW_EXPERTS)
    assert (mine["params"], mine["counts"], mine["sha256"]) == (theirs["params"], theirs["counts"], theirs["sha256"])


@pytest.mark.heavy
def test_gold_experts_replay_to_100(sw_experts, cfg):
    trajs = list(read_jsonl(sw_experts, Trajectory))
    assert len(trajs) == 2 and all(t.success and t.score == 100 for t in trajs)
    env = make_env(cfg.benchmark)
    try:
        for traj in trajs:
            assert all(s.admissible_actions for s in traj.steps)
            assert traj.steps[-1].score == 100
            assert replay_actions(env, traj, use_alias=True) == 100
            assert replay_actions(env, traj, use_alias=False) == 100
    finally:
        env.close()


@pytest.mark.heavy
def test_a_recorded_state_is_restored_by_replaying_its_prefix(sw_experts, cfg):
    """The benchmark protocol's restore on the real env: replaying a gold prefix reaches the recorded
    observation at every step checked; a record that does not match the env is named where it diverges."""
    from nemo_act.benchmarks.base import DivergenceError, restore
    from nemo_act.benchmarks.scienceworld import EpisodeEnv

    traj = next(iter(read_jsonl(sw_experts, Trajectory)))
    env = EpisodeEnv(cfg.benchmark)
    try:
        for index in (0, 3, len(traj.steps) - 1):
            # the asset's JVM ran without the tests' JIT/GC options: with the constant identity hash
            # (benchmark.jvm_options) the observation is the same text, objects in the same order
            assert restore(env, traj, index).observation == traj.steps[index].observation
        wrong = traj.steps[2].model_copy(update={"observation": "You are on the moon."})
        bad = traj.model_copy(update={"steps": [*traj.steps[:2], wrong, *traj.steps[3:]]})
        with pytest.raises(DivergenceError, match=rf"{traj.trajectory_id}: after 2 replayed action\(s\)"):
            restore(env, bad, 3)
    finally:
        env.close()


@pytest.mark.heavy
def test_experts_manifest_counts_gold_matching(sw_experts):
    counts = read_manifest(sw_experts)["counts"]
    assert counts["episodes"] == counts["won"] == 2 and counts["failed"] == []
    assert counts["gold_actions"] == (
        counts["gold_verbatim_in_valid"]
        + counts["gold_aliased_to_valid"]
        + counts["gold_noop_kept"]
        + counts["gold_not_in_valid_kept"]
    )
    assert counts["steps"] == counts["gold_actions"]  # every gold step is recorded (no-ops tick the clock)


@pytest.mark.heavy
def test_finished_experts_are_reused(sw_experts, cfg):
    from nemo_act.steps.experts import collect_experts

    before = sw_experts.stat().st_mtime_ns
    summary = collect_experts(
        cfg,
        "test",
        sw_experts,
        tasks=["lifespan-longest-lived", "find-non-living-thing"],
        max_variations=1,
        progress=False,
    )
    assert summary.counts["won"] == 2 and sw_experts.stat().st_mtime_ns == before


@pytest.mark.heavy
def test_episodes_do_not_depend_on_what_the_simulator_ran_before(scienceworld, cfg):
    """In a JVM that had played other episodes, power-component 15 once got a 6-step gold path that
    scored 77 when replayed in a fresh JVM (9 steps there). Each episode now starts in a fresh JVM."""
    from nemo_act.benchmarks.scienceworld import replay_gold

    env = make_env(cfg.benchmark)
    try:
        first, _ = replay_gold(env, "power-component", 15, "test")
        replay_gold(env, "find-non-living-thing", 0, "test")  # something else in between
        again, _ = replay_gold(env, "power-component", 15, "test")
        assert first.success and first == again
        assert [replay_actions(env, first) for _ in range(2)] == [100, 100]
    finally:
        env.close()


@pytest.mark.heavy
def test_experts_are_the_same_bytes_whatever_the_jvm_options_and_the_workers(scienceworld, cfg, tmp_path, monkeypatch):
    """Two collections of the same held-out demo episodes write the same experts file: one with HotSpot's JIT and GC
    on two env workers, one with the tests' client compiler and serial GC on one worker that plays every episode
    after the other (a fresh JVM each, ``fresh_env_per_episode``).

    ScienceWorld keeps objects in hash sets keyed by Java's identity hash, which HotSpot draws per thread as threads
    are made: with HotSpot's default, anything that changes the JVM's threads (its GC and compiler threads, which
    py4j thread served a call, the load) changed the order a room lists its objects in and the gold agent's choices.
    Measured before ``benchmark.jvm_options`` (2026-12-04): ``chemistry-mix-paint-secondary-color`` 18 took a
    16-step gold path in one ``make demo`` and 8 in the next; 16 with HotSpot's defaults and 8 with the tests'
    options, every time. With the default options (a constant identity hash) both give one 12-step path.
    """
    from nemo_act.steps.experts import collect_experts

    files = {}
    for java, workers in (("", 2), (os.environ["JAVA_TOOL_OPTIONS"], 1)):
        monkeypatch.setenv("JAVA_TOOL_OPTIONS", java)
        out = tmp_path / f"workers_{workers}" / "experts.jsonl"
        collect_experts(cfg, "dev", out, tasks=["chemistry-mix-paint-secondary-color"], max_variations=2,
                        workers=workers, progress=False)  # fmt: skip
        files[workers] = out.read_bytes()
    trajs = [Trajectory.model_validate_json(line) for line in files[2].splitlines()]
    assert [(t.variation, t.success, len(t.steps)) for t in trajs] == [(18, True, 12), (19, True, 10)]
    assert files[1] == files[2]


# Upper bound on the chat template's own tokens around a one-turn prompt (Qwen3 and Olmo-3 add ~15).
TEMPLATE_TOKENS = 64


def _longest_prompt_bytes(trajs, cfg) -> int:
    """UTF-8 bytes of the longest ACT selection or action-generation prompt over every state.

    Qwen3 and Olmo-3 tokenizers are byte-level BPE: every token covers at least one byte, so a
    prompt's byte count bounds its token count without the (not downloadable) tokenizers. The
    alternative candidate is the longest action the state lists: no sampled action the prompt
    accepts as admissible is longer.
    """
    from nemo_act.prompts.render import generation_prompt, selection_prompt
    from nemo_act.prompts.state import expert_action, trajectory_state

    longest = 0
    for traj in trajs:
        for i, step in enumerate(traj.steps):
            alt = max(step.admissible_actions, key=len, default="look around")
            state = trajectory_state(
                traj, i, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown, must_include=[alt]
            )
            for text in (
                selection_prompt(state, [expert_action(traj, i), alt], "scienceworld", cfg.prompt),
                generation_prompt(state, "scienceworld", cfg.prompt),
            ):
                longest = max(longest, len(text.encode("utf-8")))
    return longest


def _assert_fits_every_model(longest: int, cfg) -> None:
    from nemo_act.config.load import conf_root

    completion = max(cfg.train.act.max_completion_length, cfg.train.rl.max_completion_length)
    for model_file in sorted((conf_root() / "model").glob("*.yaml")):
        if model_file.stem.startswith("tiny"):
            continue  # the tiny test models have made-up contexts
        model = load_config(overrides=[f"model={model_file.stem}"]).model
        assert longest + TEMPLATE_TOKENS + completion <= model.max_context_tokens, model_file.stem


@pytest.mark.heavy
def test_prompts_of_expert_states_fit_the_models_context(sw_experts, cfg):
    trajs = list(read_jsonl(sw_experts, Trajectory))
    longest = _longest_prompt_bytes(trajs, cfg)
    assert 1_000 < longest < 20_000
    _assert_fits_every_model(longest, cfg)


def _replay_in_worker(line: str, cfg) -> tuple[str, float]:
    traj = Trajectory.model_validate_json(line)
    env = make_env(cfg)
    try:
        return traj.trajectory_id, replay_actions(env, traj)
    finally:
        env.close()


@pytest.mark.heavy
@pytest.mark.skipif(
    not os.environ.get("NEMO_ACT_FULL_SCIENCEWORLD"),
    reason="the full 149-episode collection and replay takes 25-50 min; set NEMO_ACT_FULL_SCIENCEWORLD=1 to run it",
)
def test_full_test_split_gives_149_experts_that_replay_to_100(scienceworld, cfg, tmp_path):
    from concurrent.futures import ProcessPoolExecutor

    from nemo_act.steps.experts import collect_experts

    out = tmp_path / "sw_test.jsonl"
    summary = collect_experts(cfg, "test", out, max_variations=5, workers=2, progress=False)
    print(json.dumps({k: v for k, v in summary.counts.items() if k != "examples_not_in_valid"}))
    lines = out.read_text().splitlines()
    assert len(lines) == 149 and summary.counts["failed"] == []
    with ProcessPoolExecutor(max_workers=2) as pool:
        scores = dict(pool.map(_replay_in_worker, lines, [cfg.benchmark] * len(lines)))
        # Each episode starts in a fresh JVM, so outcomes no longer depend on what ran before; some tasks
        # are random in ScienceWorld itself (measured: grow-fruit 94 replayed to 100, 100, 100, 50 in
        # fresh JVMs). A miss is replayed up to 4 more times; every trajectory must reach 100, and misses
        # must stay rare.
        missed = [line for line in lines if scores[Trajectory.model_validate_json(line).trajectory_id] != 100]
        print(f"first-replay misses: {[Trajectory.model_validate_json(m).trajectory_id for m in missed]}")
        assert len(missed) <= 3
        for line in missed:
            tries = list(pool.map(_replay_in_worker, [line] * 4, [cfg.benchmark] * 4))
            assert any(score == 100 for _, score in tries), tries
    trajs = [Trajectory.model_validate_json(line) for line in lines]
    longest = _longest_prompt_bytes(trajs, cfg)
    print(f"longest prompt over {sum(len(t.steps) for t in trajs)} states: {longest} bytes")
    _assert_fits_every_model(longest, cfg)
