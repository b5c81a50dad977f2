"""General reasoning (`nemo-act eval-reasoning`): MATH-500 graded by math-verify over the whole real file,
GPQA's options, letter parser and CSV reader on questions we wrote (GPQA-Diamond itself is never shipped),
resume, and the tiny model through the CLI for the wiring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from nemo_act.config.load import load_config
from nemo_act.data.io import read_jsonl
from nemo_act.reasoning.data import gpqa_problems, read_gpqa, read_math500
from nemo_act.reasoning.grade import LETTERS, grade, options, parse_letter, prompt
from nemo_act.reasoning.run import Answer, evaluate_reasoning

WRITTEN = [  # our own questions in GPQA's layout
    {"Record ID": "w1", "Question": "Which gas makes up most of Earth's atmosphere?", "Correct Answer": "Nitrogen",
     "Incorrect Answer 1": "Oxygen", "Incorrect Answer 2": "Argon", "Incorrect Answer 3": "Carbon dioxide"},
    {"Record ID": "w2", "Question": "What is the derivative of x^3?", "Correct Answer": "3x^2",
     "Incorrect Answer 1": "x^2", "Incorrect Answer 2": "3x", "Incorrect Answer 3": "x^4/4"},
    {"Record ID": "w3", "Question": "Which particle has no electric charge?", "Correct Answer": "Neutron",
     "Incorrect Answer 1": "Proton", "Incorrect Answer 2": "Electron", "Incorrect Answer 3": "Positron"},
    {"Record ID": "w4", "Question": "How many chromosomes does a human somatic cell have?", "Correct Answer": "46",
     "Incorrect Answer 1": "23", "Incorrect Answer 2": "44", "Incorrect Answer 3": "48"},
    {"Record ID": "w5", "Question": "Which bond holds the two DNA strands together?", "Correct Answer": "Hydrogen",
     "Incorrect Answer 1": "Ionic", "Incorrect Answer 2": "Peptide", "Incorrect Answer 3": "Metallic"},
]  # fmt: skip


class Reference:
    """Stand-in policy: answers every problem with its reference solution (what a perfect solver writes)."""

    name = "reference"

    def generate(self, requests, n, sampling, seed):
        return [[r.extra["solution"]] * n for r in requests]


class WrongBoxed:
    """Stand-in policy: a worked-looking answer whose box holds the reference answer plus one."""

    name = "wrong"

    def generate(self, requests, n, sampling, seed):
        return [[f"Adding the parts gives $\\boxed{{{r.extra['answer']}+1}}$."] * n for r in requests]


@pytest.fixture(scope="module")
def math500(benchmarks_dir):
    path = benchmarks_dir / "math500" / "test.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is absent (MATH-500 is read from the shared benchmark folder, never shipped)")
    return path


@pytest.mark.heavy
@pytest.mark.parametrize(("policy", "expected"), [(Reference(), 100.0), (WrongBoxed(), 0.0)], ids=["ref", "wrong"])
def test_math500_scores_exactly_with_the_stand_in_policies_over_all_500(math500, policy, expected, tmp_path):
    problems = read_math500(math500)
    assert len(problems) == len({p.id for p in problems}) == 500
    cfg = load_config()
    r = evaluate_reasoning(policy, cfg, problems, tmp_path / "out", seeds=[0], progress=False)
    assert r["accuracy_mean"] == expected and r["problems"] == 500 and r["chance"] is None
    answers = list(read_jsonl(tmp_path / "out" / "seed_0" / "answers.jsonl", Answer))
    assert len(answers) == 500 and all(a.correct == (expected == 100.0) for a in answers)
    if expected:
        assert r["per_seed"][0]["unanswered"] == 0
    assert "\\boxed{}" in prompt(problems[0], 0, 0) and problems[0].question in prompt(problems[0], 0, 0)


def test_gpqa_options_are_seeded_and_each_letter_holds_the_answer_equally_often():
    problems = gpqa_problems(WRITTEN * 1, "written")
    assert options(problems[0], 0, 0) == options(problems[0], 0, 0)  # seeded
    places = Counter()
    for seed in range(4):
        for i, p in enumerate(problems):
            shown, letter = options(p, i, seed)
            assert sorted(shown) == sorted([p.answer, *p.wrong]) and shown[LETTERS.index(letter)] == p.answer
            places[letter] += 1
    assert set(places.values()) == {len(problems)}  # over 4 seeds every letter is right once per problem
    firsts = {tuple(options(p, 0, s)[0]) for s in range(8) for p in problems[:1]}
    assert len(firsts) > 1  # the wrong options' order changes with the seed
    text = prompt(problems[1], 1, 0)
    assert all(f"{x}) " in text for x in LETTERS) and "Answer: X" in text


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("The derivative follows from the power rule.\nAnswer: B", "B"),
        ("I first thought Answer: A, but no.\nAnswer: (C)", "C"),
        ("so the answer is D.", "D"),
        ("**Answer:** c", None),  # a lower-case letter is not an option letter
        ("The answer is a neutron.", None),
        ("Therefore $\\boxed{A}$", "A"),
        ("Comparing the options...\n(B)", "B"),
        ("<think>Answer: A</think>Nitrogen dominates.\nAnswer: D", "D"),
        ("No letter here.", None),
    ],
)
def test_gpqa_letter_parser(text, letter):
    assert parse_letter(text) == letter


def test_gpqa_grading_follows_the_shuffle(tmp_path):
    problems = gpqa_problems(WRITTEN, "written")
    for seed in (0, 1):
        for i, p in enumerate(problems):
            _, right = options(p, i, seed)
            assert grade(p, i, seed, f"Answer: {right}") == (right, True)
            wrong = next(x for x in LETTERS if x != right)
            assert grade(p, i, seed, f"Answer: {wrong}") == (wrong, False)


def test_gpqa_csv_is_read_and_a_bad_row_is_named(tmp_path):
    import csv

    path = tmp_path / "gpqa_diamond.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["Record ID", "Question", "Correct Answer", "Incorrect Answer 1",
                                           "Incorrect Answer 2", "Incorrect Answer 3", "Subdomain"])  # fmt: skip
        w.writeheader()
        for row in WRITTEN:
            w.writerow(row | {"Subdomain": "ours"})
    assert [p.id for p in read_gpqa(path)] == ["w1", "w2", "w3", "w4", "w5"]
    rows = path.read_text().splitlines()
    rows[3] = rows[3].replace("Neutron", "")
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError, match=rf"{path}:4: column 'Correct Answer' is missing or empty"):
        read_gpqa(path)


class Flaky:
    """Answers with the letter it is given per request key, but raises on its ``fail_on``-th call (a kill)."""

    name = "flaky"

    def __init__(self, letters, fail_on=None):
        self.letters, self.calls, self.fail_on = letters, 0, fail_on

    def generate(self, requests, n, sampling, seed):
        self.calls += 1
        if self.calls == self.fail_on:
            raise KeyboardInterrupt("killed")
        return [["Answer: " + self.letters[r.key]] * n for r in requests]


def test_an_interrupted_run_resumes_with_only_the_missing_problems_and_refuses_other_settings(tmp_path):
    problems = gpqa_problems(WRITTEN, "written")
    right = {f"gpqa/{p.id}": options(p, i, 0)[1] for i, p in enumerate(problems)}
    cfg = load_config(overrides=["reasoning.chunk=2"])
    with pytest.raises(KeyboardInterrupt):
        evaluate_reasoning(Flaky(right, fail_on=2), cfg, problems, tmp_path, seeds=[0], progress=False)
    partial = tmp_path / "seed_0" / "answers.jsonl.partial"
    assert len(partial.read_text().splitlines()) == 2  # the first chunk was kept
    again = Flaky(right)
    r = evaluate_reasoning(again, cfg, problems, tmp_path, seeds=[0], progress=False)
    assert again.calls == 2 and r["accuracy_mean"] == 100.0 and r["chance"] == 0.25  # 3 problems left, chunks of 2
    assert [a.id for a in read_jsonl(tmp_path / "seed_0" / "answers.jsonl", Answer)] == [p.id for p in problems]
    other = load_config(overrides=["reasoning.chunk=2", "reasoning.sampling.temperature=1.0"])
    with pytest.raises(ValueError, match=r"params.json: this folder holds answers made with other settings \(sampl"):
        evaluate_reasoning(Flaky(right), other, problems, tmp_path, seeds=[0], progress=False)


@pytest.mark.heavy
@pytest.mark.slow
def test_cli_runs_the_tiny_model_on_math500(tiny_model_dir, math500, tmp_path):
    """The wiring with a real (tiny, untrained) model: prompts through the chat template, sampling, grading,
    the summary and its printout."""
    cmd = [
        sys.executable, "-m", "nemo_act.cli", "eval-reasoning", "math500", "--policy", str(tiny_model_dir),
        "--data", str(math500), "--limit", "6", "--seeds", "0,1", "--out", str(tmp_path / "out"),
        "reasoning.sampling.max_new_tokens=16",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["problems"] == 6 and summary["seeds"] == [0, 1] and summary["policy"] == str(tiny_model_dir)
    assert [s["problems"] for s in summary["per_seed"]] == [6, 6]
    assert f"math500: {summary['accuracy_mean']:.2f} ± {summary['accuracy_std']:.2f} %" in proc.stdout
    assert Path(tmp_path / "out" / "seed_1" / "answers.jsonl").exists()
    assert summary["unanswered"] == sum(s["unanswered"] for s in summary["per_seed"])
    assert ("gave no answer to grade" in proc.stderr) == (summary["unanswered"] > 0)


@pytest.mark.heavy
def test_a_policy_that_answers_nothing_is_warned_about(math500, tmp_path):
    """`--policy random` writes no answers: 0.00 % is printed with a warning saying why, not silently."""
    cmd = [
        sys.executable, "-m", "nemo_act.cli", "eval-reasoning", "math500", "--policy", "random", "--data", str(math500),
        "--limit", "3", "--seeds", "0", "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "math500: 0.00 ± 0.00 %" in proc.stdout
    assert "warning: 3 of 3 responses gave no answer to grade (counted wrong); none did: does random write" in (
        proc.stderr
    )
