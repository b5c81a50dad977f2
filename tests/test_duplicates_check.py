"""The copy-paste check of ``make duplicates`` (tools/duplicates/check.py, a CI lane): the real jscpd, pinned in
tools/duplicates, on planted files: a function pasted into a second module is one pair and fails the check past
its limit; the same logic written once passes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "duplicates"))
import check  # noqa: E402

pytestmark = pytest.mark.skipif(
    shutil.which("npm") is None and not (check.HERE / "node_modules").exists(),
    reason="the copy-paste check runs jscpd, which needs Node.js and npm (Debian: apt-get install nodejs npm)",
)

PASTED = '''
def summarize(records):
    """Counts of an audit file."""
    sources = {}
    for r in records:
        for c in r.candidates:
            if c.source != "expert":
                sources[c.source] = sources.get(c.source, 0) + 1
    return {"states": len(records), "kept": sum(r.kept for r in records), "alternatives": dict(sorted(sources.items()))}
'''


def test_a_pasted_function_is_one_pair_and_fails_past_the_limit(tmp_path, capsys):
    (tmp_path / "first.py").write_text(PASTED)
    (tmp_path / "second.py").write_text("import os\n" + PASTED)
    found = check.clones([tmp_path], check.MIN_TOKENS)
    assert [sorted(Path(c[side]["name"]).name for side in ("firstFile", "secondFile")) for c in found] == [
        ["first.py", "second.py"]
    ]
    assert check.main([str(tmp_path), "--max", "0"]) == 1
    assert "duplicates: 1 pairs" in capsys.readouterr().out
    assert check.main([str(tmp_path), "--max", "1"]) == 0


def test_logic_written_once_is_no_pair(tmp_path):
    (tmp_path / "first.py").write_text(PASTED)
    (tmp_path / "second.py").write_text("from first import summarize\n\nprint(summarize([]))\n")
    assert check.clones([tmp_path], check.MIN_TOKENS) == []
