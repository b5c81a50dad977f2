"""``nemo-act eval-reasoning``: a policy on MATH-500 or GPQA-Diamond with the paper's sampling, resumable.

Each seed (``reasoning.seeds``; the paper: three, temperature 0.6, top-p 0.95) writes
``<out>/seed_<s>/answers.jsonl``, one line per problem appended as its chunk finishes (a killed run resumes
with the problems it lacks), then ``summary.json``; ``<out>/summary.json`` has accuracy mean +- std over
seeds (percent) and each seed's accuracy with its binomial standard error. Generation goes through the same
generators as everything else (``generation.backend``: HF ``generate`` or vLLM), in chunks of
``reasoning.chunk`` problems, with the budget ``reasoning.sampling.max_new_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field
from tqdm.auto import tqdm

from nemo_act.common.seeding import key_digest
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import ResumableJsonl, write_text_atomic
from nemo_act.data.records import _Record
from nemo_act.evaluation.stats import mean_std, proportion
from nemo_act.generation.base import GenerationRequest
from nemo_act.prompts.render import as_messages
from nemo_act.reasoning.data import Problem
from nemo_act.reasoning.grade import grade, prompt

CHANCE = {"math500": None, "gpqa": 0.25}


class Answer(_Record):
    """One problem's response under one seed (a line of ``answers.jsonl``)."""

    id: str
    seed: int
    output: str
    answered: str | None = Field(description="What the response concluded on (MATH: parsed answer; GPQA: letter).")
    correct: bool


def run_seed(
    generator: Any, cfg: ExperimentConfig, problems: Sequence[Problem], out: Path, seed: int, progress: bool
) -> dict[str, Any]:
    """One seed over every problem (resumable); returns its summary."""
    rs = cfg.reasoning
    index = {p.id: i for i, p in enumerate(problems)}
    with ResumableJsonl(out / "answers.jsonl", Answer, key="id") as log:
        done = log.done_keys
        todo = [p for p in problems if p.id not in done]
        bar = tqdm(total=len(problems), initial=len(problems) - len(todo), desc=f"{problems[0].set} seed {seed}",
                   unit="problem", disable=not progress)  # fmt: skip
        with bar:
            for start in range(0, len(todo), rs.chunk):
                chunk = todo[start : start + rs.chunk]
                requests = [
                    GenerationRequest(key=f"{p.set}/{p.id}", messages=as_messages(prompt(p, index[p.id], seed)),
                                      extra={"solution": p.solution, "answer": p.answer})
                    for p in chunk
                ]  # fmt: skip
                texts = generator.generate(requests, 1, rs.sampling, seed)
                answers = []
                for p, (text,) in zip(chunk, texts, strict=True):
                    answered, correct = grade(p, index[p.id], seed, text)
                    answers.append(Answer(id=p.id, seed=seed, output=text, answered=answered, correct=correct))
                log.append(answers)
                bar.update(len(chunk))
                bar.set_postfix(acc=f"{sum(a.correct for a in log.records) / len(log.records):.1%}")
        records = log.ordered(p.id for p in problems)
        log.finish()
    summary = {
        "seed": seed,
        "problems": len(records),
        "accuracy": proportion(sum(a.correct for a in records), len(records)),
        "unanswered": sum(a.answered is None for a in records),
    }
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def _guard(out_dir: Path, params: dict[str, Any]) -> None:
    """Refuse to resume a folder begun with another policy, set or sampling (answers would be mixed)."""
    path = out_dir / "params.json"
    if path.exists():
        old = json.loads(path.read_text())
        if old != json.loads(json.dumps(params)):
            diff = sorted(k for k in set(old) | set(params) if old.get(k) != params.get(k))
            raise ValueError(f"{path}: this folder holds answers made with other settings ({', '.join(diff)})")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(params, indent=2, sort_keys=True) + "\n")


def evaluate_reasoning(
    generator: Any,
    cfg: ExperimentConfig,
    problems: Sequence[Problem],
    out_dir: str | Path,
    seeds: Sequence[int] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """A policy on a reasoning set over several seeds; writes and returns ``<out_dir>/summary.json``.

    Args:
        generator: The policy.
        cfg: Experiment config (``reasoning``: sampling, seeds, chunk; ``generation``: backend).
        problems: The set (:func:`nemo_act.reasoning.data.load_problems`).
        out_dir: Results folder (``seed_<s>/answers.jsonl`` per seed; an interrupted run resumes there).
        seeds: Sampling seeds (default ``reasoning.seeds``).
        progress: Show progress bars.

    Returns:
        Accuracy mean +- std over seeds (percent), the chance level, and the per-seed summaries.
    """
    if not problems:
        raise ValueError("eval-reasoning: no problems to evaluate")
    out_dir = Path(out_dir)
    seeds = list(cfg.reasoning.seeds if seeds is None else seeds)
    _guard(out_dir, {
        "policy": generator.name, "set": problems[0].set, "sampling": cfg.reasoning.sampling.model_dump(),
        "ids": key_digest(*(p.id for p in problems)).hex(), "thinking": cfg.model.enable_thinking,
    })  # fmt: skip
    per_seed = [run_seed(generator, cfg, problems, out_dir / f"seed_{s}", s, progress) for s in seeds]
    mean, std = mean_std([100 * s["accuracy"]["value"] for s in per_seed])
    result = {
        "set": problems[0].set,
        "policy": generator.name,
        "problems": len(problems),
        "seeds": seeds,
        "accuracy_mean": mean,
        "accuracy_std": std,
        "chance": CHANCE[problems[0].set],
        "unanswered": sum(s["unanswered"] for s in per_seed),  # responses with no answer to grade (counted wrong)
        "sampling": cfg.reasoning.sampling.model_dump(),
        "per_seed": per_seed,
    }
    write_text_atomic(out_dir / "summary.json", json.dumps(result, indent=2) + "\n")
    return result
