r"""What the test suite costs: wall time per lane and per module, and the slowest tests.

    .venv/bin/python bench/test_cost.py [--lane fast|test|repeats|all] [--top 20] [--out runs/bench/test_cost]
    .venv/bin/python bench/test_cost.py --from report.xml [--from other.xml ...]

Runs pytest for a lane (``fast``: ``make test-fast``, ``-m "not heavy"``; ``test``: ``make test``, ``-m "not repeat"``;
``repeats``: ``make test-repeats``; ``all``: every test) with a JUnit
XML report (pytest's own ``--junitxml``; per-test times include setup and teardown, so a session fixture is
charged to the first test that asks for it), then prints two tables: seconds per test module (tests,
total, share of the run) and the ``--top`` slowest tests. ``--from`` reads reports written before, e.g. by
another lane (``make test-cluster`` with ``PYTEST_ADDOPTS=--junitxml=cluster.xml``). The figures go to
``<out>/test_cost.json`` too. A speed goal belongs here, printed, never in a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

LANES = {"fast": ["-m", "not heavy"], "test": ["-m", "not repeat"], "repeats": ["-m", "repeat"], "all": []}


def read_report(path: Path) -> list[dict]:
    """One dict per test case of a JUnit XML report: module, name, seconds, outcome."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = tag
        module = case.get("classname", "").split(".")[-1] if case.get("file") is None else Path(case.get("file")).name
        cases.append({"module": module, "name": case.get("name", ""), "seconds": float(case.get("time", 0) or 0),
                      "outcome": outcome})  # fmt: skip
    return cases


def run_lane(lane: str, report: Path) -> float:
    """Run one lane with a JUnit report; its wall seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *LANES[lane]]
    start = time.time()
    subprocess.run(cmd, env=env, check=False)
    return time.time() - start


def summarise(cases: list[dict], top: int) -> dict:
    """Per-module totals (descending) and the ``top`` slowest tests."""
    modules: dict[str, dict] = defaultdict(lambda: {"tests": 0, "seconds": 0.0})
    for c in cases:
        modules[c["module"]]["tests"] += 1
        modules[c["module"]]["seconds"] += c["seconds"]
    ordered = dict(sorted(modules.items(), key=lambda kv: -kv[1]["seconds"]))
    slowest = sorted(cases, key=lambda c: -c["seconds"])[:top]
    return {"modules": ordered, "slowest": slowest, "total_seconds": sum(c["seconds"] for c in cases)}


def show(summary: dict, wall: float | None, console: Console) -> None:
    """Print the module table and the slowest tests."""
    total = summary["total_seconds"] or 1.0
    t = Table(
        title=f"seconds per module ({total / 60:.1f} min in tests" + (f", {wall / 60:.1f} min wall)" if wall else ")")
    )
    for col in ("module", "tests", "seconds", "share"):
        t.add_column(col, justify="left" if col == "module" else "right")
    for name, m in summary["modules"].items():
        t.add_row(name, str(m["tests"]), f"{m['seconds']:.1f}", f"{100 * m['seconds'] / total:.1f}%")
    console.print(t)
    s = Table(title=f"the {len(summary['slowest'])} slowest tests")
    for col in ("seconds", "test"):
        s.add_column(col, justify="right" if col == "seconds" else "left")
    for c in summary["slowest"]:
        s.add_row(f"{c['seconds']:.1f}", f"{c['module']}::{c['name']}")
    console.print(s)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lane", choices=sorted(LANES), default="test")
    p.add_argument("--from", dest="reports", type=Path, nargs="+", help="JUnit XML reports to read instead of a run")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--out", type=Path, default=Path("runs/bench/test_cost"))
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    wall = None
    reports = a.reports
    if not reports:
        reports = [a.out / f"{a.lane}.xml"]
        wall = run_lane(a.lane, reports[0])
    cases = [c for r in reports for c in read_report(r)]
    summary = summarise(cases, a.top)
    show(summary, wall, Console())
    (a.out / "test_cost.json").write_text(json.dumps({"wall_seconds": wall, **summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
