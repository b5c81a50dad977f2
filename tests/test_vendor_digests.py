"""``bench/vendor_digests.py --compare``: it names the first step and part where two CPUs' digest files differ."""

import copy
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from vendor_digests import PARTS, compare  # noqa: E402

AMD = REPO / "docs" / "results" / "vendor_digests" / "AuthenticAMD.json"


def test_the_committed_file_holds_every_part_of_every_step_and_compare_names_the_first_difference(tmp_path, capsys):
    record = json.loads(AMD.read_text())
    assert record["numerics"] == "portable" and record["cpu"].startswith("AuthenticAMD")
    assert [s["step"] for s in record["steps"]] == list(range(1, len(record["steps"]) + 1)) and record["steps"]
    assert all(set(s) == {"step", *PARTS} and all(len(s[p]) == 64 for p in PARTS) for s in record["steps"])
    assert compare(AMD, AMD) == 0 and "the same for all" in capsys.readouterr().out
    other = copy.deepcopy(record)
    other["cpu"] = "GenuineIntel, a stand-in"
    other["steps"][2]["weights"] = "0" * 64  # training parts ways at step 3, generation later
    other["steps"][4]["completions"] = "1" * 64
    path = tmp_path / "GenuineIntel.json"
    path.write_text(json.dumps(other))
    assert compare(AMD, path) == 1
    assert "first difference: step 3, weights" in capsys.readouterr().out
