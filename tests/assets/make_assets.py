"""Make the committed test assets (torchtune's way: small files built once, checked to still come out the same).

    .venv/bin/python tests/assets/make_assets.py [--out tests/assets]

``sw_experts.jsonl`` (+ its manifest): real ScienceWorld gold experts, the first test variation of the two short
tasks of ``tests/conftest.py``'s ``SW_FAST_TASKS`` (10 states), as ``nemo-act experts`` collects them. The
``sw_experts`` fixture copies it instead of starting a JVM per test worker for it, and the tiny model's tokenizer
learns its merges from it (as the demo's does from its experts): benchmark text then takes ~3.4x fewer tokens
than with merges from the prompt templates alone, and every tiny-model test runs on shorter sequences.
``tests/test_scienceworld.py::test_the_committed_experts_are_what_a_collection_makes`` collects them afresh and
compares the bytes, on the JDK that made them (``sw_experts.java.txt``; elsewhere it skips, and
``test_gold_experts_replay_to_100`` checks the asset still replays to 100). ScienceWorld lists a room's objects in
the order of the JVM's identity hashes, and the gold path's choices follow it; the benchmark's ``jvm_options``
(a constant identity hash) make that order the order the program made the objects in, so JVM options such as the
tests' JIT and GC settings no longer change the bytes (before that option, ``-XX:+UseSerialGC`` alone made the gold
path focus on the chair instead of the steel table). The asset is made as ``nemo-act experts`` makes it, with
whatever ``JAVA_TOOL_OPTIONS`` the caller has. Run this script again when that test fails because the adapter
changed (say why in the commit), not to make a failure go away.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SW_FAST_TASKS = ["lifespan-longest-lived", "find-non-living-thing"]  # tests/conftest.py imports it from here


def java_version() -> str:
    """The first line of ``java -version`` (the JDK that made the asset)."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}  # no "Picked up ..." line first
    res = subprocess.run(["java", "-version"], capture_output=True, text=True, env=env, check=True)
    return res.stderr.splitlines()[0].strip()


def make_sw_experts(out: Path) -> Path:
    """Collect the ScienceWorld experts into ``out`` (a file; its manifest beside it) as ``nemo-act experts`` does."""
    from nemo_act.config import load_config
    from nemo_act.steps.experts import collect_experts

    collect_experts(load_config(), "test", out, tasks=SW_FAST_TASKS, max_variations=1, workers=1, progress=False)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=HERE, help="folder to write the assets to")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        made = make_sw_experts(Path(tmp) / "sw_experts.jsonl")
        args.out.mkdir(parents=True, exist_ok=True)
        for f in (made, made.with_name(made.name + ".manifest.json")):
            shutil.copyfile(f, args.out / f.name)
            print(args.out / f.name)
    (args.out / "sw_experts.java.txt").write_text(java_version() + "\n")
    print(args.out / "sw_experts.java.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
