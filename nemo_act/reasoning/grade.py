"""Prompts and grading of the general-reasoning sets: MATH-500 by ``math-verify``, GPQA by the parsed letter.

MATH-500: the reference answer is parsed as LaTeX and the response's last boxed / LaTeX answer is parsed and
compared by ``math_verify.verify`` (Hugging Face's verifier: numeric, symbolic, set and interval equality).
GPQA: the four options are shown as A-D, the correct one at position ``(index + seed) mod 4`` (so every
letter holds the answer equally often over problems and over seeds: chance is 25% whatever a model's letter
bias) and the three wrong ones in a per-problem seeded order; the response's letter is read from its last
``Answer: X`` line, else its last boxed letter, else a final line that is only the letter.
"""

from __future__ import annotations

import re

from nemo_act.common.seeding import key_rng
from nemo_act.prompts.render import template
from nemo_act.reasoning.data import Problem

LETTERS = "ABCD"
_ANSWER = re.compile(r"(?i:answer)\s*(?:(?i:is)\s*)?[:：]?\s*\**\s*\(?([A-D])\)?(?![A-Za-z])")
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*\(?([A-D])\)?\s*\}?\s*\}")
_ALONE = re.compile(r"^\W*\(?([A-D])\)?\W*$")


def options(problem: Problem, index: int, seed: int) -> tuple[list[str], str]:
    """A GPQA problem's options in display order and the correct letter.

    Args:
        problem: The problem (its answer and three wrong options).
        index: Its place in the set (decides the correct option's position with ``seed``).
        seed: The evaluation seed.
    """
    wrong = list(problem.wrong)
    key_rng("gpqa-options", seed, problem.id).shuffle(wrong)
    place = (index + seed) % len(LETTERS)
    return wrong[:place] + [problem.answer] + wrong[place:], LETTERS[place]


def prompt(problem: Problem, index: int, seed: int) -> str:
    """The user message of a problem (``reasoning_math.txt`` / ``reasoning_gpqa.txt``, ours)."""
    if problem.set == "math500":
        return template("reasoning_math").format(question=problem.question)
    shown, _ = options(problem, index, seed)
    listed = "\n".join(f"{letter}) {text}" for letter, text in zip(LETTERS, shown, strict=True))
    return template("reasoning_gpqa").format(question=problem.question, options=listed)


def parse_letter(text: str) -> str | None:
    """The option letter a response concludes on, or None.

    Its last ``Answer: X``, else its last boxed letter, else a last line that is only a letter.
    """
    text = re.sub(r"<think>.*?</think>", " ", text, flags=re.DOTALL | re.IGNORECASE)
    for pattern in (_ANSWER, _BOXED):
        found = pattern.findall(text)
        if found:
            return found[-1].upper()
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if lines and (m := _ALONE.match(lines[-1].strip())):
        return m.group(1).upper()
    return None


def grade(problem: Problem, index: int, seed: int, text: str) -> tuple[str | None, bool]:
    """What a response answered (as text) and whether it is correct."""
    if problem.set == "gpqa":
        letter = parse_letter(text)
        return letter, letter == options(problem, index, seed)[1]
    from math_verify import parse, verify

    gold = parse(f"${problem.answer}$")
    pred = parse(text)
    return (str(pred[-1]) if pred else None), bool(pred) and bool(verify(gold, pred))
