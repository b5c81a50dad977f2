"""Rewards of the ACT selection task and of direct action generation. Pure functions, no engine imports.

The reward looks only at the final ``<action>...</action>`` of a response, never at its reasoning:
text inside a ``<think>...</think>`` block is removed before parsing, and everything outside the
action tag is ignored.

A response is *well formed* when, after the reasoning block is removed, it holds exactly one complete
``<action>...</action>`` pair with non-empty content and no stray ``<action>``/``</action>`` tag.
Malformed responses get only the format penalty: a response that lists both candidates in two
tags must not collect the accuracy reward.

Parts (values from config, ``rewards.selection`` / ``rewards.action``):

* ``accuracy``: ``correct`` when the parsed action is the expert action;
* ``admissible``: ``admissible`` when it is not the expert action but is admissible (selection: and,
  by default, one of the two candidates); 0 when the benchmark has no admissibility reward;
* ``format``: ``malformed`` (a penalty) when the response is not well formed, else 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from nemo_act.config.schema import RewardValues, SelectionRewardConfig
from nemo_act.rewards.tool_calls import TEXT_REPLY, bare, call_admissible, canonical_calls, entry_schema, tool_entries

ACTION_OPEN = "<action>"  # the answer tag: the one place it is spelled (generation stops, targets, parsing)
ACTION_CLOSE = "</action>"
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"</?action\s*>", re.IGNORECASE)
_SLOT = re.compile(r"<[^<>]+>")  # a slot of an admissible template: search[<query>]


class ParseStatus(StrEnum):
    """Why a response did or did not yield a well-formed action."""

    OK = "ok"
    NO_TAG = "no_tag"
    EMPTY = "empty"
    UNCLOSED = "unclosed"
    MULTIPLE = "multiple"
    STRAY_TAG = "stray_tag"
    UNCLOSED_THINK = "unclosed_think"


@dataclass(frozen=True)
class ParsedAction:
    """Result of parsing a response.

    Attributes:
        action: Text of the last complete ``<action>`` tag, stripped; None when there is none.
        status: Why the response is or is not well formed.
    """

    action: str | None
    status: ParseStatus

    @property
    def well_formed(self) -> bool:
        """Exactly one complete, non-empty action tag and nothing stray."""
        return self.status is ParseStatus.OK


def strip_reasoning(text: str) -> tuple[str, bool]:
    """Remove ``<think>...</think>`` blocks.

    Returns:
        The text without reasoning blocks, and whether a ``<think>`` was left unclosed (then
        everything after it is reasoning and is dropped too).
    """
    text = _THINK_BLOCK.sub(" ", text)
    lower = text.lower()
    if "<think>" in lower:
        return text[: lower.index("<think>")], True
    # Qwen3 with a pre-filled "<think>" in the prompt: the response starts inside the block.
    if "</think>" in lower:
        return text[lower.rindex("</think>") + len("</think>") :], False
    return text, False


def parse_action(text: str) -> ParsedAction:
    """Parse the final ``<action>...</action>`` of a model response.

    Args:
        text: The full response (may contain reasoning, any characters).

    Returns:
        The parsed action and the parse status. Never raises.
    """
    body, unclosed_think = strip_reasoning(text)
    tags = [(m.start(), m.end(), not m.group(0).startswith("</")) for m in _TAG.finditer(body)]
    complete: list[str] = []
    stray = False
    open_at: int | None = None
    for start, end, is_open in tags:
        if is_open:
            if open_at is not None:
                stray = True  # nested or repeated opening tag
            open_at = end
        else:
            if open_at is None:
                stray = True
            else:
                complete.append(body[open_at:start])
                open_at = None
    last = complete[-1].strip() if complete else None
    if not complete:
        if unclosed_think:
            return ParsedAction(None, ParseStatus.UNCLOSED_THINK)
        return ParsedAction(None, ParseStatus.UNCLOSED if open_at is not None else ParseStatus.NO_TAG)
    if len(complete) > 1:
        status = ParseStatus.MULTIPLE
    elif not last:
        status = ParseStatus.EMPTY
    elif open_at is not None:
        status = ParseStatus.UNCLOSED
    elif stray:
        status = ParseStatus.STRAY_TAG
    else:
        status = ParseStatus.OK
    return ParsedAction(last or None, status)


def normalize_action(action: str) -> str:
    """Canonical form used to compare actions: case, inner whitespace, quotes and trailing punctuation.

    Tool calls (``name({json})``, :mod:`nemo_act.rewards.tool_calls`) are the exception: their canonical form is the
    parsed JSON with sorted keys, so string values, ids and enum values keep their case and spacing, and tool entries
    are kept as written.

    >>> normalize_action("  Go to  Kitchen. ")
    'go to kitchen'
    >>> normalize_action('get_user({"id":  "M05KNL"})')
    'get_user({"id": "M05KNL"})'
    """
    stripped = action.strip()
    if (calls := canonical_calls(stripped)) is not None:
        return calls
    if entry_schema(stripped) is not None:
        return stripped
    return bare(" ".join(action.split()).casefold())


def same_action(a: str, b: str) -> bool:
    """Whether two action strings are the same action after :func:`normalize_action`."""
    return normalize_action(a) == normalize_action(b)


@lru_cache(maxsize=65536)
def _template(entry: str) -> re.Pattern[str] | None:
    """The pattern of a normalised admissible entry with ``<...>`` slots (None: the entry has no slot)."""
    parts = _SLOT.split(entry)
    return None if len(parts) == 1 else re.compile(".+".join(re.escape(p) for p in parts), re.DOTALL)


class Admissible:
    """One state's admissible list, normalised once, as a membership test: ``action in Admissible(actions)``.

    An entry may be a template whose ``<...>`` slots stand for any non-empty text (WebShop's
    ``search[<query>]``). A list with tool entries (the traces benchmark's ``get_weather(<arguments: {...}>)``)
    admits a call only of a listed tool with arguments that validate against its entry, and text only where it
    lists ``<a text reply to the user>`` (:func:`nemo_act.rewards.tool_calls.call_admissible`). A template itself (an
    entry with a ``<...>`` slot, a tool entry, the text-reply entry) is never admissible: copying it is no action.
    Build one per state where many actions are checked against the same list (a policy's pool, a group of
    candidates).
    """

    def __init__(self, actions: Iterable[str]) -> None:
        entries = [normalize_action(a) for a in actions]
        self._exact = set(entries)
        self.tools = tool_entries(entries)  # by name
        self._text_reply = TEXT_REPLY in self._exact
        self._patterns = [] if self.tools else [p for e in entries if (p := _template(e)) is not None]
        self.templates = {e for e in entries if _template(e) is not None}

    def is_template(self, action: str) -> bool:
        """Whether ``action`` is a template, one of this list's or any tool entry: never admissible, never a pair's."""
        norm = normalize_action(action)
        return norm in self.templates or norm == TEXT_REPLY or entry_schema(norm) is not None and "<" in norm

    def __contains__(self, action: object) -> bool:
        norm = normalize_action(str(action))
        if self.is_template(norm):
            return False
        if norm in self._exact:
            return True
        if self.tools:
            return call_admissible(norm, self.tools, self._text_reply)
        return any(p.fullmatch(norm) for p in self._patterns)


def in_actions(action: str, actions: Iterable[str]) -> bool:
    """Whether ``action`` is one of ``actions`` after :func:`normalize_action` (see :class:`Admissible`).

    >>> in_actions('get_weather({"city": "Oslo"})', ['get_weather(<arguments: {"city": string}>)'])
    True
    >>> in_actions('get_weather({"town": "Oslo"})', ['get_weather(<arguments: {"city": string}>)'])
    False
    """
    return action in Admissible(actions)


@dataclass(frozen=True)
class RewardParts:
    """A reward split into the parts engines log separately.

    Attributes:
        accuracy: R_acc.
        admissible: R_adm.
        format: R_fmt (0 or the malformed penalty).
        action: Parsed action (None when there was none).
        status: Parse status.
        named_neither: (selection only) well formed but the action is neither candidate.
        chosen_index: (selection only) index of the chosen candidate, None when neither.
    """

    accuracy: float
    admissible: float
    format: float
    action: str | None
    status: ParseStatus
    named_neither: bool = False
    chosen_index: int | None = None

    @property
    def total(self) -> float:
        """R = R_acc + R_adm + R_fmt."""
        return self.accuracy + self.admissible + self.format

    @property
    def correct(self) -> bool:
        """The parsed action is the expert action (accuracy part earned)."""
        return self.accuracy > 0


def selection_reward(
    response: str,
    candidates: Sequence[str],
    expert_index: int,
    candidates_admissible: Sequence[bool],
    values: SelectionRewardConfig,
    use_admissible: bool,
    admissible_actions: Sequence[str] = (),
) -> RewardParts:
    """Score an ACT selection response.

    Args:
        response: Model output (reasoning + ``<action>`` tag).
        candidates: The two candidate actions in the order shown.
        expert_index: Which candidate is the expert action.
        candidates_admissible: Whether each candidate is admissible in the env.
        values: Reward values (``rewards.selection``).
        use_admissible: The benchmark's ``admissible_reward`` switch (False for WebShop).
        admissible_actions: Admissible list, consulted for a choice that is neither candidate when
            ``values.admissible_requires_candidate`` is False.

    Returns:
        The reward parts, the chosen candidate index, and whether neither candidate was named.
    """
    parsed = parse_action(response)
    if not parsed.well_formed or parsed.action is None:
        return RewardParts(0.0, 0.0, values.malformed, parsed.action, parsed.status)
    norm = normalize_action(parsed.action)
    chosen = next((i for i, c in enumerate(candidates) if normalize_action(c) == norm), None)
    if chosen == expert_index:
        return RewardParts(values.correct, 0.0, 0.0, parsed.action, parsed.status, chosen_index=chosen)
    if chosen is not None:
        admissible = candidates_admissible[chosen]
    else:
        admissible = not values.admissible_requires_candidate and in_actions(parsed.action, admissible_actions)
    adm = values.admissible if (use_admissible and admissible) else 0.0
    return RewardParts(0.0, adm, 0.0, parsed.action, parsed.status, named_neither=chosen is None, chosen_index=chosen)


def action_reward(
    response: str,
    expert_action: str,
    admissible_actions: Sequence[str],
    values: RewardValues,
    use_admissible: bool,
) -> RewardParts:
    """Score a directly generated action (RL stage).

    Args:
        response: Model output.
        expert_action: The expert's action at this state.
        admissible_actions: The env's admissible actions at this state.
        values: Reward values (``rewards.action``).
        use_admissible: The benchmark's ``admissible_reward`` switch.

    Returns:
        The reward parts.
    """
    parsed = parse_action(response)
    if not parsed.well_formed or parsed.action is None:
        return RewardParts(0.0, 0.0, values.malformed, parsed.action, parsed.status)
    if same_action(parsed.action, expert_action):
        return RewardParts(values.correct, 0.0, 0.0, parsed.action, parsed.status)
    adm = values.admissible if (use_admissible and in_actions(parsed.action, admissible_actions)) else 0.0
    return RewardParts(0.0, adm, 0.0, parsed.action, parsed.status)


def score_selection(
    response: str, row: Mapping[str, Any], values: SelectionRewardConfig, use_admissible: bool
) -> RewardParts:
    """The ``selection`` reward of the registry (:func:`selection_reward` over an ACT row's fields)."""
    return selection_reward(
        response,
        row["candidates"],
        row["expert_index"],
        row["candidates_admissible"],
        values,
        use_admissible,
        row.get("admissible_actions", ()),
    )


def score_action(response: str, row: Mapping[str, Any], values: RewardValues, use_admissible: bool) -> RewardParts:
    """The ``action`` reward of the registry (:func:`action_reward` over an RL row's fields)."""
    return action_reward(response, row["expert_action"], row["admissible_actions"], values, use_admissible)
