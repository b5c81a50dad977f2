"""Evaluation in the real ScienceWorld env, and held-out selection accuracy."""

import json

import pytest

from nemo_act.data import Pair, read_jsonl
from nemo_act.evaluation.rollout import EpisodeRecord, evaluate_policy, load_gold
from nemo_act.evaluation.selection import forced_choice, free_selection
from nemo_act.evaluation.stats import mean_std, proportion
from nemo_act.generation import GoldGenerator, RandomGenerator


@pytest.fixture(scope="module")
def gold_eval(sw_experts, sw_fast_tasks, cfg, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval_gold")
    res = evaluate_policy(
        GoldGenerator(),
        cfg,
        "test",
        out,
        tasks=sw_fast_tasks,
        max_variations=1,
        seeds=[0],
        workers=1,
        envs_per_worker=2,
        gold=load_gold(sw_experts),
        progress=False,
    )
    return res, out


@pytest.mark.heavy
def test_gold_policy_scores_100(gold_eval):
    res, out = gold_eval
    assert res["episodes"] == 2 and res["score_mean"] == 100.0 and res["completion_mean"] == 100.0
    records = list(read_jsonl(out / "seed_0" / "episodes.jsonl", EpisodeRecord))
    assert all(r.success and r.max_score == 100 for r in records)
    step = records[0].steps[0]
    assert set(step) >= {"prompt", "output", "action", "reward", "score", "observation"}
    assert "<action>" in step["output"] and "Your admissible actions" in step["prompt"]
    assert json.loads((out / "summary.json").read_text())["policy"] == "gold"


class QuotesThenAnswers(GoldGenerator):
    """Reasons in plain text, quoting another admissible action in tags, then answers the expert's action in tags:
    what a model that reasons without ``<think>`` (SmolLM2) may write."""

    name = "quotes_then_answers"

    def generate(self, requests, n, sampling, seed):
        answers = super().generate(requests, n, sampling, seed)
        out = []
        for req, texts in zip(requests, answers, strict=True):
            other = next(a for a in sorted(req.admissible_actions) if a != req.gold_action)
            out.append([f"Not <action>{other}</action>, it does not help. So: {t}" for t in texts])
        return out


@pytest.mark.heavy
def test_an_answer_with_several_action_tags_plays_the_last_and_is_recorded_malformed(
    sw_experts, sw_fast_tasks, cfg, tmp_path
):
    """The rule for several ``<action>`` tags (docs/models.md): the env is sent the last complete tag's action (the
    gold here, so every episode is won), and each step is recorded not well formed (the rewards give such an answer
    the format penalty only: tests/test_rewards.py)."""
    res = evaluate_policy(QuotesThenAnswers(), cfg, "test", tmp_path, tasks=sw_fast_tasks, max_variations=1, seeds=[0],
                          workers=1, envs_per_worker=2, gold=load_gold(sw_experts), progress=False)  # fmt: skip
    assert res["episodes"] == 2 and res["completion_mean"] == 100.0
    records = list(read_jsonl(tmp_path / "seed_0" / "episodes.jsonl", EpisodeRecord))
    steps = [s for r in records for s in r.steps]
    assert steps and all(s["output"].count("<action>") == 2 and not s["well_formed"] for s in steps)


@pytest.mark.heavy
@pytest.mark.slow
def test_random_policy_scores_far_less(cfg, sw_fast_tasks, tmp_path):
    res = evaluate_policy(
        RandomGenerator(),
        cfg,
        "test",
        tmp_path,
        tasks=sw_fast_tasks,
        max_variations=1,
        seeds=[0, 1],
        workers=2,
        envs_per_worker=1,
        progress=False,
    )
    assert res["episodes"] == 2 and len(res["per_seed"]) == 2
    assert res["score_mean"] < 50 and res["completion_mean"] == 0.0
    records = list(read_jsonl(tmp_path / "seed_1" / "episodes.jsonl", EpisodeRecord))
    assert all(len(r.steps) <= cfg.benchmark.max_steps for r in records)


@pytest.mark.heavy
def test_finished_seed_is_not_replayed(gold_eval, cfg, sw_fast_tasks):
    """Resuming: a seed whose episodes are all recorded runs no episode again (no env needed)."""
    res, out = gold_eval

    class Exploding:
        name = "never-called"

        def generate(self, *a, **k):
            raise AssertionError("a finished episode was played again")

    partial = out / "seed_0" / "episodes.jsonl.partial"
    partial.write_text((out / "seed_0" / "episodes.jsonl").read_text())
    again = evaluate_policy(
        Exploding(),
        cfg,
        "test",
        out,
        tasks=sw_fast_tasks,
        max_variations=1,
        seeds=[0],
        workers=1,
        envs_per_worker=1,
        progress=False,
    )
    assert again["score_mean"] == res["score_mean"]


@pytest.mark.heavy
def test_selection_accuracy_of_simple_policies(sw_experts, cfg, tmp_path):
    from nemo_act.steps.pairs import collect_pairs

    out = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, out, k=2, progress=False)
    pairs = list(read_jsonl(out, Pair))

    class PickFirst:
        name = "first"

        def generate(self, requests, n, sampling, seed):
            return [
                [
                    r.messages[0]["content"]
                    .split("NEXT step:\nAction 1: ")[1]
                    .split("\n")[0]
                    .join(["<action>", "</action>"])
                ]
                for r in requests
            ]

    summary, rows = free_selection(PickFirst(), pairs, cfg, cfg.eval.sampling, 0)
    first = sum(p.expert_index == 0 for p in pairs)
    assert summary["accuracy"]["count"] == first and summary["picked_alternative"]["count"] == len(pairs) - first
    assert summary["accuracy_expert_first"]["value"] == 1.0 and summary["accuracy_expert_second"]["value"] == 0.0
    assert summary["named_neither"]["count"] == 0 and len(rows) == len(pairs)

    class Rambler:
        name = "rambler"

        def generate(self, requests, n, sampling, seed):
            return [["<action>look around the universe</action>"] for _ in requests]

    summary, _ = free_selection(Rambler(), pairs, cfg, cfg.eval.sampling, 0)
    assert summary["named_neither"]["value"] == 1.0 and summary["accuracy"]["value"] == 0.0


@pytest.mark.heavy
def test_forced_choice_with_a_real_model(sw_experts, tiny_model_dir, cfg, tmp_path):
    from nemo_act.generation.hf import HFGenerator
    from nemo_act.steps.pairs import collect_pairs

    out = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, out, progress=False)
    pairs = list(read_jsonl(out, Pair))[:12]
    gen = HFGenerator(cfg.model, cfg.generation, str(tiny_model_dir))
    res = forced_choice(gen, pairs, cfg)
    assert res["accuracy"]["n"] == len(pairs) > 0 and 0 <= res["accuracy"]["value"] <= 1
    # scores are real log-likelihoods: a longer continuation of the same tokens is less likely
    from nemo_act.generation.base import GenerationRequest

    r = GenerationRequest(key="x", messages=[{"role": "user", "content": "hi"}])
    short, long = gen.score([r, r], ["<action>go</action>", "<action>go go go go</action>"])
    assert long < short < 0


def test_stats():
    assert proportion(3, 4)["value"] == 0.75 and proportion(3, 4)["stderr"] == pytest.approx((0.75 * 0.25 / 4) ** 0.5)
    assert mean_std([1.0, 3.0]) == (2.0, pytest.approx(2**0.5))
    assert mean_std([5.0]) == (5.0, 0.0)
