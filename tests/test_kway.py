"""K-way selection (beyond the paper): the ACT prompt shows the expert with N-1 alternatives, order seeded and
balanced, reward unchanged; pair construction keeps N-1 distinct alternatives per pair or counts why not."""

from __future__ import annotations

from collections import Counter

import pytest

from nemo_act.config.load import load_config
from nemo_act.data.records import Pair, Trajectory
from nemo_act.evaluation.selection import chance, forced_choice
from nemo_act.kinds.act import act_rows
from nemo_act.prompts.render import selection_prompt, template
from nemo_act.rewards import selection_reward
from nemo_act.steps.pairs import _order_rng, build_outcome, expert_position, summarize

ACTIONS = ["go north", "go south", "go east", "go west", "open door", "look around", "take key"]


def _traj(n_states: int) -> Trajectory:
    steps = [{"observation": f"Room {i}.", "action": "take key", "admissible_actions": ACTIONS,
              "action_admissible": True} for i in range(n_states)]  # fmt: skip
    return Trajectory.model_validate(
        {"trajectory_id": "scienceworld/kway/0", "benchmark": "scienceworld", "task_id": "kway", "variation": 0,
         "split": "train", "task_description": "Find the key.", "steps": steps, "score": 100.0, "success": True,
         "source": "test"}
    )  # fmt: skip


def _samples(*actions: str) -> list[str]:
    return [f"<action>{a}</action>" for a in actions]


def test_the_experts_position_is_balanced_over_1000_rows():
    cfg = load_config(overrides=["pairs.candidates=3"])
    traj = _traj(1200)
    places = Counter()
    for i in range(len(traj.steps)):
        out = build_outcome(traj, i, _samples("go north", "go south"), cfg, "test", seed=0)
        (pair,) = out.pairs
        assert len(pair.candidates) == 3 and pair.candidates[pair.expert_index] == "take key"
        assert sorted(pair.alternatives) == ["go north", "go south"]
        places[pair.expert_index] += 1
    assert sum(places.values()) == 1200
    for position in range(3):
        assert abs(places[position] / 1200 - 1 / 3) <= 0.05, places


def test_two_way_pairs_keep_the_original_coin():
    for j in range(500):
        pid = f"scienceworld/x/0/{j}#0"
        assert expert_position(0, pid, 2) == (0 if _order_rng(0, pid).random() < 0.5 else 1)


def test_a_state_with_too_few_distinct_alternatives_is_skipped_and_counted():
    cfg = load_config(overrides=["pairs.candidates=3"])
    traj = _traj(3)
    outcomes = [
        build_outcome(traj, 0, _samples("go north", "Go North.", "take key"), cfg, "test", seed=0),  # 1 distinct
        build_outcome(traj, 1, _samples("go north", "go south", "go east"), cfg, "test", seed=0),  # 1 pair + 1 left
        build_outcome(traj, 2, _samples("go north", "go south", "go east", "go west"), cfg, "test", seed=0),
    ]
    assert [len(o.pairs) for o in outcomes] == [0, 1, 2]
    c = summarize(outcomes, k=4)
    assert c["states_too_few_alternatives"] == 1 and c["dropped_leftover"] == 2 and c["pairs"] == 3
    assert [p.pair_id for p in outcomes[2].pairs] == ["scienceworld/kway/0/2#0", "scienceworld/kway/0/2#1"]
    assert {a for p in outcomes[2].pairs for a in p.alternatives} == {"go north", "go south", "go east", "go west"}


def test_the_prompt_lists_every_candidate_and_the_two_way_prompt_is_the_papers():
    cfg = load_config(overrides=["pairs.candidates=3"])
    traj = _traj(1)
    two = build_outcome(traj, 0, _samples("go north"), load_config(), "test", seed=0).pairs[0]
    three = build_outcome(traj, 0, _samples("go north", "go south"), cfg, "test", seed=0).pairs[0]
    text2 = selection_prompt(two.state, two.candidates, "scienceworld", cfg.prompt)
    assert f"Action 1: {two.candidates[0]}\nAction 2: {two.candidates[1]}\n" in text2
    assert text2.endswith(template("act_instruction"))
    text3 = selection_prompt(three.state, three.candidates, "scienceworld", cfg.prompt)
    lines = "\n".join(f"Action {i}: {c}" for i, c in enumerate(three.candidates, start=1))
    assert lines in text3 and "Which action is best as the NEXT step?" in text3
    head = text2.split("Candidate Actions for the NEXT step:")[0]
    assert text3.startswith(head)  # the state part is the same
    rows = act_rows([three], cfg)
    assert rows[0]["candidates"] == three.candidates and rows[0]["expert_index"] == three.expert_index


def test_the_reward_is_unchanged_for_more_candidates():
    cfg = load_config()
    values = cfg.rewards.selection
    candidates, flags = ["go north", "take key", "go south"], [True, True, False]
    right = selection_reward("<action>take key</action>", candidates, 1, flags, values, True)
    assert right.correct and right.total == values.correct
    admissible = selection_reward("<action>go north</action>", candidates, 1, flags, values, True)
    assert not admissible.correct and admissible.chosen_index == 0 and admissible.total == values.admissible
    wrong = selection_reward("<action>go south</action>", candidates, 1, flags, values, True)
    assert not wrong.correct and wrong.chosen_index == 2 and wrong.total == 0.0  # not admissible: no bonus
    two = selection_reward("<action>take key</action>", candidates[:2], 1, flags[:2], values, True)
    assert right.total == two.total


class Scorer:
    """Scores a continuation by how much it likes the action (a stand-in for a model's log-likelihood)."""

    def __init__(self, liked):
        self.liked = liked

    def score(self, requests, continuations):
        return [0.0 if self.liked in c else -1.0 for c in continuations]


def test_forced_choice_picks_the_most_likely_of_n_and_reports_the_chance_line():
    cfg = load_config(overrides=["pairs.candidates=3"])
    traj = _traj(40)
    pairs = [p for i in range(40) for p in
             build_outcome(traj, i, _samples("go north", "go south"), cfg, "test", seed=0).pairs]  # fmt: skip
    assert chance(pairs) == pytest.approx(1 / 3)
    assert forced_choice(Scorer("take key"), pairs, cfg)["accuracy"]["value"] == 1.0
    liked_north = forced_choice(Scorer("go north"), pairs, cfg)
    assert liked_north["accuracy"]["value"] == 0.0 and liked_north["chance"] == pytest.approx(1 / 3)


def test_a_pair_whose_fields_disagree_is_refused():
    pair = build_outcome(_traj(1), 0, _samples("go north", "go south"), load_config(overrides=["pairs.candidates=3"]),
                         "test", seed=0).pairs[0]  # fmt: skip
    data = pair.model_dump()
    with pytest.raises(ValueError, match="one flag per candidate"):
        Pair.model_validate(data | {"candidates_admissible": [True, True]})
    with pytest.raises(ValueError, match="expert_index"):
        Pair.model_validate(data | {"expert_index": 5})
    with pytest.raises(ValueError, match="first non-expert candidate"):
        Pair.model_validate(data | {"alternative_action": pair.alternatives[1]})
