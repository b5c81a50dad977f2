"""Tool calls as actions: parse ``name({json})`` calls, and check them against a tool's admissible entry.

An agent-trace state lists one entry per tool, ``get_weather(<arguments: {"city": string, "days"?: integer}>)``
(:func:`nemo_act.benchmarks.traces.tool_template` writes them: ``?`` = optional, a type name or ``any``, or the
allowed values ``"economy"|"business"`` of an enum; a last field ``...`` = other arguments allowed, as JSON Schema
allows them unless the tool's schema says ``"additionalProperties": false``), plus :data:`TEXT_REPLY` for a plain
answer. Entries and :data:`TEXT_REPLY` are templates: an action that copies one is never admissible. The entry is
the one thing every admissibility check sees (the trace reader, pair construction, both engines' rewards: rows
carry the admissible list), so it carries what a call is checked against: the tool's name, its required
arguments, each argument's type or values. :func:`call_admissible` turns the entry back into a JSON Schema and
validates the call's arguments with ``jsonschema`` (the kept validator of the field; a row does not carry the
tool's full schema, so nested properties are checked only as ``object``/``array``). A text reply is admissible
when it is text and not call-shaped (``get_weather(``, ``delete_database({"x": 1})`` are calls that must match
a listed tool). Calls are compared in their canonical form (:func:`canonical_calls`: parsed JSON, keys sorted,
JSON spacing; whitespace, wrapping quotes and trailing punctuation around the answer stripped by :func:`bare`, the
rule text answers follow too), so key order and spacing outside strings never matter and string values, ids, enum
values and tool names are compared exactly, case included (no normalisation of argument values).
Entries keep their case too.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

TEXT_REPLY = "<a text reply to the user>"  # the entry for a turn that answers in text
MORE = "..."  # an entry's last field when the tool takes arguments beyond those it names
CALL_SEPARATOR = "; "  # parallel calls of one turn
_NAME = r"[A-Za-z_][\w.\-]*"
_CALL_START = re.compile(rf"({_NAME})\s*\(\s*")  # spacing outside strings is free: "name ( {" too
_CALL_SHAPED = re.compile(rf"{_NAME}(?:\(|\s+\(\s*\{{)")  # "name(" or "name ({": not "Yes (see above)"
TRAILING_PUNCT = ".,;:!?"
QUOTES = "\"'`"
_ENTRY = re.compile(rf"^({_NAME})\(<arguments: \{{(.*)\}}>\)$", re.DOTALL)
_STRING = r'"(?:[^"\\]|\\.)*"'
_ALT = rf"{_STRING}|[^,|\s\"]+"
_FIELD = re.compile(rf"\s*({_STRING})(\?)?:\s*((?:{_ALT})(?:\|(?:{_ALT}))*)\s*(?:,|$)")
_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_DECODER = json.JSONDecoder()


def bare(text: str) -> str:
    """``text`` without what may stand around an action: whitespace, wrapping quotes, trailing punctuation.

    The one rule for every answer, call or text (``call({...}).`` is the call ``call({...})``).

    >>> bare(' `get_user({"id": "M05KNL"})`. ')
    'get_user({"id": "M05KNL"})'
    """
    prev = None
    while prev != text:
        prev = text
        text = text.strip().strip(QUOTES).rstrip(TRAILING_PUNCT).strip()
    return text


def looks_like_call(text: str) -> bool:
    """Whether ``text`` starts like a tool call (``name(``, or ``name ({``): then it must be one, of a listed tool."""
    return _CALL_SHAPED.match(bare(text)) is not None


def parse_calls(text: str) -> list[tuple[str, Any]] | None:
    """``name({json}); name2({json})`` as ``[(name, arguments), ...]``; None when it is not exactly that.

    Spacing outside strings is free (``name ( {...} )``); what :func:`bare` strips around the calls is ignored.
    """
    calls, pos, text = [], 0, bare(text)
    while True:
        m = _CALL_START.match(text, pos)
        if m is None:
            return None
        try:
            args, end = _DECODER.raw_decode(text, m.end())
        except json.JSONDecodeError:
            return None
        while end < len(text) and text[end].isspace():
            end += 1
        if not text.startswith(")", end):
            return None
        calls.append((m.group(1), args))
        pos = end + 1
        if pos == len(text):
            return calls
        while text[pos].isspace():  # before the separator: the text ends with ")" (bare), so this stops
            pos += 1
        if text[pos] != CALL_SEPARATOR[0]:
            return None
        pos += 1
        while pos < len(text) and text[pos].isspace():
            pos += 1


def canonical_call(name: str, arguments: Any) -> str:
    """The canonical text of one tool call: ``name({json arguments with sorted keys})``.

    >>> canonical_call("get_weather", {"days": 2, "city": "Oslo"})
    'get_weather({"city": "Oslo", "days": 2})'
    """
    return f"{name}({json.dumps(arguments, sort_keys=True, ensure_ascii=False)})"


def canonical_calls(text: str) -> str | None:
    """``text`` as canonical calls (:func:`canonical_call`, joined by ``"; "``), or None when it is not calls.

    >>> canonical_calls('get_weather({"days":2,  "city": "Oslo"})')
    'get_weather({"city": "Oslo", "days": 2})'
    """
    calls = parse_calls(text)
    return None if calls is None else CALL_SEPARATOR.join(canonical_call(name, args) for name, args in calls)


@lru_cache(maxsize=4096)
def entry_schema(entry: str) -> tuple[str, dict[str, Any]] | None:
    """A tool entry's name and the JSON Schema of its arguments; None when ``entry`` is no tool entry."""
    if entry.endswith("({})") and re.fullmatch(rf"{_NAME}\(\{{\}}\)", entry):
        return entry[:-4], {"type": "object", "properties": {}, "additionalProperties": False}
    m = _ENTRY.match(entry)
    if m is None:
        return None
    name, body = m.groups()
    props: dict[str, Any] = {}
    required: list[str] = []
    more = body.rstrip().endswith(MORE)
    if more:
        body = body.rstrip()[: -len(MORE)].rstrip().rstrip(",")
    pos = 0
    while pos < len(body):
        f = _FIELD.match(body, pos)
        if f is None or f.end() == pos:
            return None
        key, optional, alts = json.loads(f.group(1)), f.group(2), f.group(3)
        props[key] = _value_schema(alts)
        if not optional:
            required.append(key)
        pos = f.end()
    return name, {"type": "object", "properties": props, "required": required, "additionalProperties": more}


def _value_schema(alts: str) -> dict[str, Any]:
    values = re.findall(_ALT, alts)
    if any(v.startswith('"') or re.fullmatch(r"-?\d+(\.\d+)?", v) or v in ("true", "false") for v in values):
        return {"enum": [json.loads(v) for v in values]}
    if values == ["any"]:
        return {}
    return {"type": [v for v in values if v in _TYPES] or values}


@lru_cache(maxsize=4096)
def _validator(entry: str):

    parsed = entry_schema(entry)
    return None if parsed is None else Draft202012Validator(parsed[1])


def tool_entries(entries: list[str]) -> dict[str, str]:
    """The tool entries of an admissible list, by tool name (empty: the list has none)."""
    return {parsed[0]: entry for entry in entries if (parsed := entry_schema(entry)) is not None}


def call_admissible(action: str, tools: dict[str, str], text_reply: bool) -> bool:
    """Whether ``action`` is admissible against a list with the tool entries ``tools`` (:func:`tool_entries`).

    Args:
        action: The action (normalised, as the entries are).
        tools: The list's tool entries by name (not empty).
        text_reply: Whether the list holds :data:`TEXT_REPLY`.

    Returns:
        True for a text reply (where ``text_reply``) or for calls that are each a listed tool's, with arguments that
        validate against its entry; False for anything else (an unlisted tool, bad JSON, a missing required or
        mistyped argument, a value outside an enum, call-shaped garbage, an empty reply).
    """
    if not action.strip():
        return False
    calls = parse_calls(action)
    if calls is None:
        return text_reply and not looks_like_call(action)
    for name, args in calls:
        entry = tools.get(name)
        if entry is None or not isinstance(args, dict) or not _validator(entry).is_valid(args):
            return False
    return True
