"""The general-reasoning problem sets, read from a file the user names or from the Hugging Face hub at run time.

Neither set ships with nemo-act. MATH-500 (the PRM800K test subset of MATH, MIT licence) is a JSONL file with
``problem``, ``solution``, ``answer``, ``unique_id`` (HuggingFaceH4/MATH-500 on the hub). GPQA-Diamond's
authors ask that its questions not be republished: it is read from the user's copy of the dataset's CSV
(``gpqa_diamond.csv``: ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``, ``Record ID``) or from
the gated hub dataset ``Idavidrein/gpqa`` (config ``gpqa_diamond``), never from this repository.

A malformed line or row stops with the file, line and field named.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from nemo_act.data.io import read_jsonl
from nemo_act.data.records import _Record

SETS = ("math500", "gpqa")
HUB = {"math500": ("HuggingFaceH4/MATH-500", None, "test"), "gpqa": ("Idavidrein/gpqa", "gpqa_diamond", "train")}
GPQA_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


class MathRow(_Record):
    """One MATH-500 line (the fields we read; others are allowed and ignored)."""

    model_config = {"extra": "ignore"}
    problem: str = Field(min_length=1)
    solution: str = ""
    answer: str = Field(min_length=1)
    unique_id: str = Field(min_length=1)


class Problem(_Record):
    """One problem, whatever its set: the question, the reference answer, and for multiple choice the options."""

    id: str
    set: Literal["math500", "gpqa"]
    question: str
    answer: str = Field(description="MATH: the reference answer (LaTeX); GPQA: the correct option's text.")
    solution: str = Field(default="", description="MATH: the reference solution.")
    wrong: list[str] = Field(default_factory=list, description="GPQA: the three incorrect options.")


def read_math500(path: str | Path) -> list[Problem]:
    """MATH-500 problems from a JSONL file (``problem``, ``solution``, ``answer``, ``unique_id``)."""
    return [
        Problem(id=r.unique_id, set="math500", question=r.problem, answer=r.answer, solution=r.solution)
        for r in read_jsonl(path, MathRow)
    ]


def gpqa_problems(rows: Iterable[Mapping[str, Any]], source: str) -> list[Problem]:
    """GPQA problems from the dataset's rows (CSV dicts or hub rows), each checked for its columns.

    Args:
        rows: Rows with ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3`` (``Record ID`` if present).
        source: Where they come from, for messages (``file.csv`` or the hub name).

    Raises:
        ValueError: A row lacks a column or has an empty one, naming the source, row and column.
    """
    out = []
    for n, row in enumerate(rows, start=2 if source.endswith(".csv") else 1):  # CSV: line 1 is the header
        for col in GPQA_COLUMNS:
            if not str(row.get(col) or "").strip():
                raise ValueError(f"{source}:{n}: column '{col}' is missing or empty")
        out.append(
            Problem(
                id=str(row.get("Record ID") or f"gpqa-{n}"), set="gpqa", question=row["Question"].strip(),
                answer=row["Correct Answer"].strip(), wrong=[row[f"Incorrect Answer {i}"].strip() for i in (1, 2, 3)],
            )
        )  # fmt: skip
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{source}: duplicate Record ID {next(i for i in ids if ids.count(i) > 1)}")
    return out


def read_gpqa(path: str | Path) -> list[Problem]:
    """GPQA problems from the dataset's CSV file (the user's copy)."""
    path = Path(path)
    with path.open(encoding="utf-8", newline="") as fh:
        return gpqa_problems(csv.DictReader(fh), str(path))


def load_problems(name: str, path: str | None) -> list[Problem]:
    """A problem set from ``path``, or from the Hugging Face hub when it is None (needs network; GPQA: access).

    Args:
        name: ``math500`` or ``gpqa``.
        path: The user's file (MATH-500 JSONL, GPQA CSV), or None for the hub.
    """
    if name not in SETS:
        raise ValueError(f"unknown reasoning set '{name}'; sets are: {', '.join(SETS)}")
    if path is not None:
        return read_math500(path) if name == "math500" else read_gpqa(path)
    from datasets import load_dataset

    repo, config, split = HUB[name]
    try:
        rows = load_dataset(repo, config, split=split)
    except ConnectionError as err:  # offline (HF_HUB_OFFLINE=1) and not cached, or no network
        raise FileNotFoundError(
            f"{name}: no file given (--data or reasoning.{name}) and the HF hub's {repo} cannot be reached ({err}); "
            "pass the set's file with --data"
        ) from None
    if name == "math500":
        return [Problem(id=r["unique_id"], set="math500", question=r["problem"], answer=r["answer"],
                        solution=r.get("solution", "")) for r in rows]  # fmt: skip
    return gpqa_problems(rows, repo)
