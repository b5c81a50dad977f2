"""Count the copy-pasted code inside nemo_act/ and fail past a limit (``make duplicates``, a CI lane).

The detector is jscpd (pinned with its lock in this folder; installed with ``npm ci`` on first use), the field's
copy-paste detector, run on the package's Python files at 38 tokens a clone (2 pairs on the tree of issue 59; 11 at
30, 1 at 50). It finds copies token for token, and only those. The house rule of issues 47 and 59 counts more: any
two places sharing six or more lines that are the same, or the same but for names, strings and numbers (a renamed
copy). That count is taken with the developers' ``duplicates`` command (not in CI: it is no package of ours to
install); it was 12 pairs in nemo_act/ at 59c5ba7 and is 3 now, each a place where the logic differs
(docs/architecture.md, "Copies"). jscpd stays as CI's guard against the verbatim kind, at the same limit.

Usage: ``python tools/duplicates/check.py [--max N] [--min-tokens N] [PATH ...]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MIN_TOKENS = 38
MAX_PAIRS = 3


def jscpd() -> Path:
    """The pinned jscpd, installed from this folder's lock the first time."""
    exe = HERE / "node_modules" / ".bin" / "jscpd"
    if not exe.exists():
        npm = shutil.which("npm")
        if npm is None:
            sys.exit("tools/duplicates: needs Node.js and npm (Debian: apt-get install nodejs npm)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)
    return exe


def clones(paths: list[Path], min_tokens: int) -> list[dict]:
    """The clone pairs jscpd finds in the Python files under ``paths`` (its JSON report's ``duplicates``)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [str(jscpd()), "--silent", "--format", "python", "--min-tokens", str(min_tokens)]
        cmd += ["--reporters", "json", "--output", out, *map(str, paths)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.loads((Path(out) / "jscpd-report.json").read_text())["duplicates"]


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _where(side: dict) -> str:
    return f"{_shown(Path(side['name']))}:{side['start']}-{side['end']}"


def main(argv: list[str] | None = None) -> int:
    """Print every clone pair as a table row; exit 1 when there are more than ``--max``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[ROOT / "nemo_act"])
    ap.add_argument("--max", type=int, default=MAX_PAIRS, help="most clone pairs allowed")
    ap.add_argument("--min-tokens", type=int, default=MIN_TOKENS, help="fewest tokens a clone spans")
    args = ap.parse_args(argv)
    found = clones([p.resolve() for p in args.paths], args.min_tokens)
    print(f"| lines | tokens | first | second |  (jscpd, clones of >= {args.min_tokens} tokens)")
    print("|---:|---:|---|---|")
    for c in found:
        print(f"| {c['lines']} | {c['tokens']} | {_where(c['firstFile'])} | {_where(c['secondFile'])} |")
    ok = len(found) <= args.max
    where = ", ".join(map(_shown, args.paths))
    print(f"duplicates: {len(found)} pairs in {where} (at most {args.max}): {'ok' if ok else 'too many'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
