"""README.md is the front door (issue 59): a few screens, no line past 120 columns, and a map of every docs page."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_the_readme_fits_a_few_screens_and_120_columns():
    lines = README.splitlines()
    assert len(lines) <= 125, f"README.md has {len(lines)} lines; move detail to docs/"
    wide = [f"{i}: {len(line)}" for i, line in enumerate(lines, start=1) if len(line) > 120]
    assert wide == [], f"README.md lines over 120 columns: {wide}"


def test_the_two_commands_come_first_and_every_docs_page_is_in_its_table():
    assert README.index("make demo") < README.index("## What the demo prints") < README.index("## On a Slurm")
    assert "make test" in README[: README.index("## What the demo prints")]
    named = set(re.findall(r"`(docs/[a-z_]+\.md)`", README))
    pages = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert pages - named == set(), f"docs pages README does not name: {sorted(pages - named)}"
    assert named - pages == set(), f"README names docs pages that do not exist: {sorted(named - pages)}"
