"""The bounded subset of admissible actions a prompt shows.

Records keep the env's full valid-action list (ScienceWorld lists a median ~1,100 and up to ~6,500
actions per step). A prompt lists at most ``benchmark.max_admissible_shown`` of them:

1. when the env lists no more than that, all of them, in the env's order;
2. otherwise the actions that share the most words with the task description and the current
   observation (the objects and places the agent can act on now), ties broken by a hash of the
   state key and the action so the choice is fixed per state and independent of the expert;
3. the actions in ``must_include`` (at training time: the expert action and the ACT candidates that
   are admissible) are always kept, replacing the lowest-ranked ones, and the kept list is sorted
   alphabetically so no position marks them.

At evaluation the same ranking runs with nothing forced in, so the agent sees the same kind of list. An
action matching a template entry (``<...>`` slots: ``search[<query>]``) is shown as that entry. A state
whose env lists nothing (the traces benchmark without a tool list) shows an empty list: forcing the
expert in would make it the only entry.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from nemo_act.rewards import in_actions, normalize_action

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the to in on of and or at for with from into is are you your it this that".split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _tiebreak(key: str, action: str) -> str:
    return hashlib.sha1(f"{key}\x00{action}".encode()).hexdigest()


def select_admissible(
    admissible: Sequence[str],
    context: str,
    max_shown: int,
    must_include: Sequence[str] = (),
    key: str = "",
) -> list[str]:
    """Pick the admissible actions a prompt shows.

    Args:
        admissible: The env's full list.
        context: Text the ranking reads (task description + current observation).
        max_shown: Upper bound on the returned list's length (``must_include`` always fits: the
            bound grows to ``len(must_include)`` if needed).
        must_include: Actions that must be shown; an entry matching a listed action (normalised, or
            a template's slots) is shown as the env lists it.
        key: Stable state key for tie-breaking.

    Returns:
        The shown actions.
    """
    if not admissible:
        return []  # a benchmark without an action list (traces without tools): nothing to show, nothing forced
    if len(admissible) <= max_shown:
        out = list(admissible)
        out += [m for m in must_include if not in_actions(m, out)]
        return out
    by_norm = {normalize_action(a): a for a in admissible}
    forced: dict[str, str] = {}
    for m in must_include:
        listed = by_norm.get(normalize_action(m)) or next((a for a in admissible if in_actions(m, [a])), m)
        forced.setdefault(normalize_action(listed), listed)
    ctx = _words(context)
    ranked = sorted(
        (a for a in admissible if normalize_action(a) not in forced),
        key=lambda a: (-len(_words(a) & ctx), _tiebreak(key, a)),
    )
    room = max(max_shown - len(forced), 0)
    return sorted(list(forced.values()) + ranked[:room])
