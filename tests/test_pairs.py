"""Pair construction on real ScienceWorld experts, with the random policy and a real tiny model."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from nemo_act.data import Pair, Trajectory, read_jsonl, read_manifest
from nemo_act.generation import RandomGenerator
from nemo_act.rewards import normalize_action, same_action
from nemo_act.steps.pairs import DegenerateDataError, StateOutcome, build_outcome, collect_pairs


def _check_pairs(pairs_path, experts_path):
    trajs = {t.trajectory_id: t for t in read_jsonl(experts_path, Trajectory)}
    pairs = list(read_jsonl(pairs_path, Pair))
    for p in pairs:
        traj_id, step = p.state_id.rsplit("/", 1)
        step_rec = trajs[traj_id].steps[int(step)]
        assert p.expert_action == (step_rec.admissible_alias or step_rec.action)
        assert not same_action(p.alternative_action, p.expert_action)
        assert not same_action(p.alternative_action, step_rec.action)
        assert p.candidates[p.expert_index] == p.expert_action
        assert p.expert_action in p.state.admissible_actions
        if p.candidates_admissible[1 - p.expert_index]:
            assert p.alternative_action in p.state.admissible_actions
    return pairs


@pytest.mark.heavy
def test_random_policy_pairs(sw_experts, cfg, tmp_path):
    out = tmp_path / "pairs.jsonl"
    summary = collect_pairs(sw_experts, RandomGenerator(), cfg, out, k=4, seed=1, progress=False)
    c = summary.counts
    states = sum(len(t.steps) for t in read_jsonl(sw_experts, Trajectory))
    assert c["states"] == states and c["sampled"] == 4 * states
    assert c["dropped_duplicate"] == 0 and c["dropped_unparsable"] == 0  # random excludes the expert
    assert c["pairs"] + c["dropped_repeat"] == c["sampled"]
    pairs = _check_pairs(out, sw_experts)
    assert len(pairs) == c["pairs"] and c["alternative_admissible"] == c["pairs"]
    assert len({p.pair_id for p in pairs}) == len(pairs)
    # expert position: balanced within 4 standard deviations of a fair coin
    n, first = len(pairs), sum(p.expert_index == 0 for p in pairs)
    assert abs(first - n / 2) <= 4 * math.sqrt(n) / 2 and c["expert_first"] == first
    m = read_manifest(out)
    assert m["params"]["policy"] == "random" and m["params"]["k"] == 4 and m["params"]["seed"] == 1
    assert m["inputs"]["experts"]["sha256"] and m["counts"] == c


@pytest.mark.heavy
def test_max_states_pairs_the_first_states_only_and_says_so(sw_experts, cfg, tmp_path):
    """pairs.max_states (train=smoke: 8): the first N states of the file in file order, the same pairs a full run
    makes for them, and the bound in the manifest (an unbounded run does not reuse the file)."""
    bounded = cfg.model_copy(update={"pairs": cfg.pairs.model_copy(update={"max_states": 5})})
    full, some = tmp_path / "full.jsonl", tmp_path / "some.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, full, k=2, progress=False)
    summary = collect_pairs(sw_experts, RandomGenerator(), bounded, some, k=2, progress=False)
    first = [f"{t.trajectory_id}/{i}" for t in read_jsonl(sw_experts, Trajectory) for i in range(len(t.steps))][:5]
    assert summary.counts["states"] == 5
    assert [p.model_dump() for p in read_jsonl(some, Pair)] == [
        p.model_dump() for p in read_jsonl(full, Pair) if p.state_id in first
    ]
    assert read_manifest(some)["params"]["max_states"] == 5 and "max_states" not in read_manifest(full)["params"]


@pytest.mark.heavy
def test_pairs_do_not_depend_on_the_tokenizer(sw_experts, cfg, tmp_path):
    out = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, out, progress=False)
    text = out.read_text()
    assert "input_ids" not in text and "<|im_start|>" not in text
    first = json.loads(text.splitlines()[0])
    assert set(first) >= {"expert_action", "alternative_action", "candidates", "expert_index", "state", "state_id"}


@pytest.mark.heavy
def test_outcome_drops_duplicates_unparsable_and_repeats(sw_experts, cfg):
    traj = next(iter(read_jsonl(sw_experts, Trajectory)))
    expert = traj.steps[0].admissible_alias or traj.steps[0].action
    other = next(a for a in traj.steps[0].admissible_actions if not same_action(a, expert))
    samples = [
        f"<action>{expert.upper()}.</action>",  # the expert, differently spelled
        "I would rather not say",  # no tag
        f"<action>{other}</action>",
        f"<action> {other} </action>",  # repeat of a kept alternative
    ]
    o = build_outcome(traj, 0, samples, cfg, "test", seed=0)
    assert (o.duplicate, o.unparsable, o.repeat, len(o.pairs)) == (1, 1, 1, 1)
    assert normalize_action(o.pairs[0].alternative_action) == normalize_action(other)


@pytest.mark.heavy
def test_state_whose_samples_all_equal_the_expert_is_counted(sw_experts, cfg, tmp_path):
    class EchoExpert:
        name = "echo"

        def generate(self, requests, n, sampling, seed):
            return [[f"<action>{r.exclude[0]}</action>"] * n for r in requests]

    out = tmp_path / "pairs.jsonl"
    with pytest.raises(DegenerateDataError, match=r"only 0 of \d+ expert states .*equal the expert action"):
        collect_pairs(sw_experts, EchoExpert(), cfg, out, k=2, progress=False)
    assert out.exists()  # written before the check: nothing is lost
    anyway = cfg.model_copy(update={"pairs": cfg.pairs.model_copy(update={"min_state_share": 0.0})})
    c = collect_pairs(sw_experts, EchoExpert(), anyway, out, k=2, progress=False).counts
    assert c["pairs"] == 0 and c["states_all_duplicate"] == c["states"] == c["states_without_pair"] > 0
    outcomes = list(read_jsonl(out.with_name(out.name + ".states.jsonl"), StateOutcome))
    assert len(outcomes) == c["states"] and all(o.duplicate == 2 for o in outcomes)


@pytest.mark.heavy
def test_a_policy_without_the_answer_tag_stops_with_counts_and_cause(sw_experts, cfg, tmp_path):
    """The issue's case: a policy that cannot write <action> yet keeps almost no pairs; the run must say so
    with the counts and the likely cause, not go on to train on a handful of rows."""

    class Chatty:
        name = "chatty"
        seen = 0

        def generate(self, requests, n, sampling, seed):
            out = []  # one state in 10 gets a well-formed alternative, the rest is prose
            for r in requests:
                tagged = self.seen % 10 == 0
                self.seen += 1
                out.append([f"<action>{r.admissible_actions[-1]}</action>" if tagged else "I should look."] * n)
            return out

    out = tmp_path / "pairs.jsonl"
    strict = cfg.model_copy(update={"pairs": cfg.pairs.model_copy(update={"min_state_share": 0.5})})
    with pytest.raises(DegenerateDataError) as err:
        collect_pairs(sw_experts, Chatty(), strict, out, k=2, progress=False)
    msg = str(err.value)
    assert "pairs.min_state_share=0.5" in msg and "cannot write the answer format" in msg
    c = read_manifest(out)["counts"]
    assert f"{c['dropped_unparsable']} of {c['sampled']} samples" in msg and c["pairs"] > 0
    # the same stop when the finished files are reused by a re-run
    with pytest.raises(DegenerateDataError):
        collect_pairs(sw_experts, Chatty(), strict, out, k=2, progress=False)


def test_empty_experts_file_is_an_error_not_zero_pairs(cfg, tmp_path):
    empty = tmp_path / "experts.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match=r"experts.jsonl: no expert trajectories in the file"):
        collect_pairs(empty, RandomGenerator(), cfg, tmp_path / "pairs.jsonl", progress=False)
    assert not (tmp_path / "pairs.jsonl").exists()


@pytest.mark.heavy
def test_tiny_model_pairs_are_sampled_through_generate(sw_experts, tiny_model_dir, cfg, tmp_path):
    from nemo_act.generation.hf import HFGenerator

    small = cfg.model_copy(  # an untrained model writes no tags: the degenerate-data stop is off here
        update={
            "pairs": cfg.pairs.model_copy(
                update={"sampling": cfg.pairs.sampling.model_copy(update={"max_new_tokens": 16}), "min_state_share": 0}
            )
        }
    )
    gen = HFGenerator(cfg.model, cfg.generation, str(tiny_model_dir))
    out = tmp_path / "pairs.jsonl"
    c = collect_pairs(sw_experts, gen, small, out, k=2, progress=False).counts
    outcomes = list(read_jsonl(out.with_name(out.name + ".states.jsonl"), StateOutcome))
    assert c["sampled"] == 2 * c["states"] == 2 * len(outcomes)
    assert all(len(o.samples) == 2 and all(isinstance(s, str) for s in o.samples) for o in outcomes)
    # an untrained model rarely closes an action tag: what it wrote is counted, never lost
    assert c["dropped_unparsable"] + c["dropped_duplicate"] + c["dropped_repeat"] + c["pairs"] == c["sampled"]
    _check_pairs(out, sw_experts)


@pytest.mark.heavy
def test_changed_parameters_do_not_mix_into_an_unfinished_run(sw_experts, cfg, tmp_path):
    out = tmp_path / "pairs.jsonl"
    out.with_name(out.name + ".params.json.partial").write_text(json.dumps({"policy": "other"}))
    with pytest.raises(ValueError, match="unfinished run with other parameters"):
        collect_pairs(sw_experts, RandomGenerator(), cfg, out, progress=False)


@pytest.mark.heavy
@pytest.mark.slow
def test_killed_run_resumes_without_duplicates_or_gaps(sw_experts, tiny_model_dir, tmp_path):
    """`nemo-act pairs` is killed (SIGKILL) mid-way, re-run, and must equal an uninterrupted run."""
    common = [
        "--experts",
        str(sw_experts),
        "--policy",
        str(tiny_model_dir),
        "--k",
        "2",
        "--seed",
        "3",
        "generation.batch_size=2",
        "pairs.sampling.max_new_tokens=24",
        "pairs.min_state_share=0",  # an untrained model writes no tags; this test is about the kill and resume
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cli = [sys.executable, "-m", "nemo_act.cli", "pairs"]
    killed = tmp_path / "killed.jsonl"
    partial = tmp_path / "killed.jsonl.states.jsonl.partial"
    proc = subprocess.Popen([*cli, *common, "--out", str(killed)], env=env, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        if partial.exists() and len(partial.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not killed.exists() and partial.exists()
    n_before = len(partial.read_text().splitlines())
    states = sum(len(t.steps) for t in read_jsonl(sw_experts, Trajectory))
    assert 0 < n_before < states, "the kill must land mid-way"

    subprocess.run([*cli, *common, "--out", str(killed)], env=env, check=True, capture_output=True)
    straight = tmp_path / "straight.jsonl"
    subprocess.run([*cli, *common, "--out", str(straight)], env=env, check=True, capture_output=True)

    resumed_states = [o.state_id for o in read_jsonl(tmp_path / "killed.jsonl.states.jsonl", StateOutcome)]
    assert len(resumed_states) == len(set(resumed_states)) == states
    assert killed.read_text() == straight.read_text()
    assert read_manifest(killed)["counts"] == read_manifest(straight)["counts"]
    assert not partial.exists()


@pytest.mark.heavy
def test_a_batch_cut_short_by_a_kill_resumes_to_the_uninterrupted_bytes(sw_experts, tiny_model_dir, cfg, tmp_path):
    """The HF backend seeds a batch from its first request: a resumed run whose last batch was only half written
    asks for that batch whole again and keeps its missing states, so the pairs equal an uninterrupted run's
    (before: the rest of the batch was sampled as a smaller batch, reseeded from its first remaining state)."""
    from nemo_act.generation.hf import HFGenerator

    small = cfg.model_copy(
        update={
            "pairs": cfg.pairs.model_copy(
                update={"sampling": cfg.pairs.sampling.model_copy(update={"max_new_tokens": 12}), "min_state_share": 0}
            ),
            "generation": cfg.generation.model_copy(update={"batch_size": 4}),
        }
    )
    gen = HFGenerator(small.model, small.generation, str(tiny_model_dir))

    class StopsAfterOneBatch:
        name = gen.name

        def __init__(self) -> None:
            self.calls = 0

        def generate(self, requests, n, sampling, seed):
            self.calls += 1
            if self.calls > 1:
                raise KeyboardInterrupt  # the kill, after the first batch was written
            return gen.generate(requests, n, sampling, seed)

    straight, torn = tmp_path / "straight.jsonl", tmp_path / "torn.jsonl"
    collect_pairs(sw_experts, gen, small, straight, k=2, progress=False)
    with pytest.raises(KeyboardInterrupt):
        collect_pairs(sw_experts, StopsAfterOneBatch(), small, torn, k=2, progress=False)
    partial = torn.with_name(torn.name + ".states.jsonl.partial")
    lines = partial.read_text().splitlines(keepends=True)
    assert len(lines) == 4
    partial.write_text("".join(lines[:2]))  # the batch's last two states were not written when it died
    collect_pairs(sw_experts, gen, small, torn, k=2, progress=False)
    assert torn.read_text() == straight.read_text()
    assert torn.with_name(torn.name + ".states.jsonl").read_text() == straight.with_name(
        straight.name + ".states.jsonl").read_text()  # fmt: skip
