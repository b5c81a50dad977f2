"""README.md's demo tables are what ``make demo`` wrote on this CPU: its vendor's block against the summary file.

The demo's floats are held to one set of code paths on every x86-64 CPU (``cpu_numerics: portable``), yet its ACT
stage still ends elsewhere on an Intel and an AMD CPU (README.md says what is the same and what is not), so README
keeps one block per CPU vendor, each between ``<!-- demo:begin VENDOR -->`` and ``<!-- demo:end -->``, VENDOR being
``vendor_id`` of ``/proc/cpuinfo`` (``GenuineIntel``, ``AuthenticAMD``; the machine's architecture elsewhere).

``python3 tools/check_readme_demo.py [README.md] [runs/demo/report/summary.md] [--cpu VENDOR]`` exits 0 when the
block of this CPU's vendor (or ``--cpu``'s) is the summary file's text, else 1 with a diff, and 2 when a file is
missing or README has no block for the vendor (the message says which blocks there are). ``.ci/run`` runs it after
``make demo`` on the clean clone (``make check-readme-demo``). Standard library only.
"""

from __future__ import annotations

import argparse
import difflib
import platform
import re
import sys
from pathlib import Path

BEGIN, END = "<!-- demo:begin {cpu} -->", "<!-- demo:end -->"
_BEGIN = re.compile(r"<!-- demo:begin (\S+) -->")


def cpu_vendor(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The vendor of the CPU (``vendor_id``), or the machine's architecture where the kernel shows none."""
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id" and value.strip():
                return value.strip()
    return platform.machine() or "unknown"


def readme_blocks(text: str) -> dict[str, str]:
    """Each vendor's block: the lines between its begin marker and the next end marker."""
    blocks: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _BEGIN.fullmatch(line.strip())
        if m and END in lines[i + 1 :]:
            blocks[m.group(1)] = "\n".join(lines[i + 1 : lines.index(END, i + 1)]).strip() + "\n"
    return blocks


def check(readme: Path, summary: Path, cpu: str) -> tuple[int, str]:
    """Exit code and what to print, for the block of ``cpu``'s vendor."""
    if not summary.is_file():
        return 2, f"{summary}: no such file (run `make demo` first)"
    blocks = readme_blocks(readme.read_text(encoding="utf-8"))
    if cpu not in blocks:
        have = ", ".join(sorted(blocks)) or "none"
        return 2, (
            f"{readme}: no demo block for this CPU's vendor {cpu} (blocks: {have}); add one between "
            f"'{BEGIN.format(cpu=cpu)}' and '{END}' holding {summary}"
        )
    want = summary.read_text(encoding="utf-8").strip() + "\n"
    if blocks[cpu] == want:
        return 0, f"{readme}: the {cpu} demo block is {summary}"
    diff = difflib.unified_diff(blocks[cpu].splitlines(), want.splitlines(), str(readme), str(summary), lineterm="")
    head = f"{readme}'s {cpu} demo block differs from what `make demo` wrote ({summary}); paste the file in:"
    return 1, "\n".join([head, *diff])


def main(argv: list[str]) -> int:
    """Check README.md against the demo's summary for this CPU's vendor (or ``--cpu``'s); print the verdict."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("readme", nargs="?", type=Path, default=Path("README.md"))
    ap.add_argument("summary", nargs="?", type=Path, default=Path("runs/demo/report/summary.md"))
    ap.add_argument("--cpu", default=None, help="the vendor whose block to compare (default: this CPU's vendor_id)")
    args = ap.parse_args(argv)
    code, message = check(args.readme, args.summary, args.cpu or cpu_vendor())
    print(message, file=sys.stderr if code else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
