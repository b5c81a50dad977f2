"""The lanes of the suite: `make test` leaves out the tests marked ``repeat``, and each names the cheaper tests in
`make test` that keep its assertion (tests/conftest.py ``repeat_errors``, run at every collection); these tests plant
the mistakes it must refuse, on stand-ins of pytest's items (what the check reads of one: ``nodeid`` and
``get_closest_marker``, with real marks)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from conftest import repeat_errors

KEEPER = "tests/test_pairs.py::test_killed_run_resumes_without_duplicates_or_gaps"


@dataclass
class Item:
    """What ``repeat_errors`` reads of a collected test."""

    nodeid: str
    marks: list = field(default_factory=list)

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)


HEAVY = pytest.mark.heavy.mark


def test_a_repeat_with_a_keeper_in_make_test_passes():
    assert repeat_errors([Item("tests/x.py::test_a", [pytest.mark.repeat(KEEPER).mark, HEAVY]), Item(KEEPER)]) == []


@pytest.mark.parametrize(
    ("marks", "said"),
    [
        ([pytest.mark.repeat().mark, HEAVY], "names no test that keeps its assertion"),
        ([pytest.mark.repeat(KEEPER).mark], "must be marked heavy"),
        ([pytest.mark.repeat("tests/test_pairs.py::test_no_such_test").mark, HEAVY], "is no test of"),
        ([pytest.mark.repeat("tests/test_nowhere.py::test_a").mark, HEAVY], "is no test of"),
    ],
)
def test_a_repeat_without_a_keeper_or_heavy_is_refused(marks, said):
    (error,) = repeat_errors([Item("tests/x.py::test_a", marks), Item(KEEPER)])
    assert error.startswith("tests/x.py::test_a: ") and said in error


def test_a_keeper_that_is_a_repeat_itself_is_refused():
    keeper = Item(KEEPER, [pytest.mark.repeat("tests/x.py::test_a").mark, HEAVY])
    errors = repeat_errors([Item("tests/x.py::test_a", [pytest.mark.repeat(KEEPER).mark, HEAVY]), keeper])
    assert any("is itself a repeat" in e for e in errors)
