"""README.md's demo tables are what ``make demo`` wrote: compare its block with ``runs/demo/report/summary.md``.

``python3 tools/check_readme_demo.py [README.md] [runs/demo/report/summary.md]`` exits 0 when the text between
README's ``<!-- demo:begin -->`` and ``<!-- demo:end -->`` lines is the summary file's, else 1 with a diff (and
2 when a file or a marker is missing). ``.ci/run`` runs it after ``make demo`` on the clean clone (``make
check-readme-demo``). Standard library only.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

BEGIN, END = "<!-- demo:begin -->", "<!-- demo:end -->"


def readme_block(text: str) -> str | None:
    """The lines between the markers (None when either is missing)."""
    lines = text.splitlines()
    if BEGIN not in lines or END not in lines or lines.index(END) < lines.index(BEGIN):
        return None
    return "\n".join(lines[lines.index(BEGIN) + 1 : lines.index(END)]).strip() + "\n"


def check(readme: Path, summary: Path) -> tuple[int, str]:
    """Exit code and what to print."""
    if not summary.is_file():
        return 2, f"{summary}: no such file (run `make demo` first)"
    block = readme_block(readme.read_text(encoding="utf-8"))
    if block is None:
        return 2, f"{readme}: no '{BEGIN}' ... '{END}' block"
    want = summary.read_text(encoding="utf-8").strip() + "\n"
    if block == want:
        return 0, f"{readme}: the demo block is {summary}"
    diff = difflib.unified_diff(block.splitlines(), want.splitlines(), str(readme), str(summary), lineterm="")
    head = f"{readme}'s demo block differs from what `make demo` wrote ({summary}); paste the file in:"
    return 1, "\n".join([head, *diff])


def main(argv: list[str]) -> int:
    """Check README.md (or ``argv[0]``) against the summary (or ``argv[1]``); print the verdict."""
    readme = Path(argv[0]) if argv else Path("README.md")
    summary = Path(argv[1]) if len(argv) > 1 else Path("runs/demo/report/summary.md")
    code, message = check(readme, summary)
    print(message, file=sys.stderr if code else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
