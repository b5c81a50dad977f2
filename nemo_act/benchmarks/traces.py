r"""Your own agent traces as a benchmark: successful chat trajectories, with OpenAI-style tool calls.

No simulator: the expert data is a JSONL file of conversations, one per line, in the chat format that
OpenAI's fine-tuning files and most agent frameworks write::

    {"id": "trip-001",                                  # optional (default <file stem>:<line>)
     "split": "train",                                  # optional (default: hashed from the id, below)
     "tools": [{"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]}}}],  # optional: the tool schema list
     "messages": [{"role": "system", "content": "..."},
                  {"role": "user", "content": "Will it rain in Oslo tomorrow?"},
                  {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                   "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "{\"rain_mm\": 4}"},
                  {"role": "assistant", "content": "Yes, about 4 mm of rain."}]}

**Steps.** Every assistant turn is one expert step. Its action is the turn's tool calls, each in the canonical form
``name({json arguments, keys sorted})`` (several calls joined by ``"; "``; text that comes with calls is commentary
and is dropped), or, for a turn without calls, its text (an OpenAI refusal turn: its ``refusal`` text). Calls
compare in that canonical form (:func:`nemo_act.rewards.normalize_action`), so argument order and spacing never make
two calls differ, while string values (ids, enum values) are compared exactly. The observation of a step is what
came since the previous assistant turn: user messages as ``User: ...``, tool results as ``Tool <name>: ...`` (a
result given as a JSON object or array, as its JSON). A tool result must answer a call of an earlier assistant turn
(its ``tool_call_id``, or its ``name`` for legacy ``function`` messages): one that answers none is a bad line, since
its tool would be lost. The task is the first user message; an assistant turn before it (a service log's greeting)
is not a step but the first step's history (``Assistant: ...``). System (and developer) messages are the recorded
agent's own instructions (a policy, the user's account facts): with ``benchmark.system_prompt: keep`` (the default)
they are the trajectory's ``context``, shown before the task under ``Instructions:`` and cut at
``prompt.max_context_chars``; ``drop`` leaves them out. ``benchmark.history_k`` sets how many past steps a prompt
shows for traces (``prompt.history_k`` follows it): the facts an agent's call depends on (an id the user gave, what
a lookup returned) are often several turns back.

**Admissible actions.** When a line has ``tools``, each step lists one entry per tool, a template such as
``get_weather(<arguments: {"city": string, "days"?: integer, "unit"?: "c"|"f"}>)`` (``?`` = optional; a type,
or an enum's values); the list ends with ``<a text reply to the user>``, since a chat agent may always answer in
text. A call is admissible when its tool is listed and its arguments validate against the entry (required
keys, types, enum values: :mod:`nemo_act.rewards.tool_calls`, with ``jsonschema``); a text reply when it is text and not
call-shaped; nothing else (an unlisted tool, bad JSON, call-shaped garbage, an empty reply). The same rule
decides a step's ``action_admissible``, a pair's candidates' and the admissibility reward of both engines. The
prompt shows the templates, never a concrete call. A line without
``tools`` has no admissible list: the prompt shows none and the admissibility reward cannot fire (off).

**Lengths.** Production logs hold tool outputs of megabytes and arguments of any size: every part of a prompt
is cut to its ``prompt.max_*_chars`` budget, a state whose expert call is over ``prompt.max_candidate_chars`` is
skipped and named by this file's line, and every stage row is checked in tokens before training
(:mod:`nemo_act.prompts.length`). A trajectory's ``origin`` is its ``file:line``, for those messages.

**Splits.** A line's ``split`` wins; otherwise ``heldout_share`` of the traces (chosen by a hash of the id,
so stable when the file grows) are ``dev`` (held-out selection accuracy) and the rest ``train``. Real logs
repeat tasks (several trials of one request): traces of one group (a line's ``group``, or the key that
``benchmark.split_by`` names, top-level or in ``metadata``) are split together, by a hash of the group, so no
task is on both sides; the experts manifest counts each split's groups.

Bad lines stop the read with ``file:line: field '...'`` (e.g. ``messages[3].tool_calls[0].function.arguments``),
or with ``on_bad_trace: skip`` are left out and counted by reason (the experts manifest's ``skipped`` and one
printed line per reason with its line numbers). A UTF-8 byte order mark at the start of the file is accepted.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from nemo_act.common.seeding import key_int
from nemo_act.config.schema import BenchmarkConfigBase
from nemo_act.data.io import RecordError, iter_json
from nemo_act.data.records import Step, Trajectory
from nemo_act.rewards import in_actions
from nemo_act.rewards.tool_calls import CALL_SEPARATOR, MORE, TEXT_REPLY, canonical_call

ADAPTER_VERSION = 2  # 2: exact argument values, "..." for arguments a tool allows beyond its named ones
LIVE_EXPERT_ACTION = False
SOURCE = "traces"
_SYSTEM_ROLES = ("system", "developer")
_INDEX = re.compile(r"\[\d+\]")  # messages[3] -> messages[] in a skip reason
ID_RULE = "id:"  # benchmark.split_by over the trace id rather than a key
ID_TRIAL = "id:trial"  # the id less its trailing trial number (trial_stem)
REPLY_ENTRY = TEXT_REPLY  # with tools: a text turn is a legal action too (any text that is not call-shaped)


class TracesConfig(BenchmarkConfigBase):
    """Agent traces: a JSONL file of successful chat trajectories (no simulator)."""

    name: Literal["traces"]
    path: str | None = Field(description="JSONL file of chat traces (None: set benchmark.path=FILE).")
    heldout_share: float = Field(ge=0, lt=1, description="Share of traces without a 'split' put in 'dev'.")
    split_by: str | None = Field(
        description="What groups traces, e.g. the task a trial ran: every trace of a group lands in one split. A key "
        "of a line (or of its 'metadata' object); 'id:trial': the id less a trailing trial number "
        "(airline-task12-trial3 -> airline-task12); 'id:REGEX': the regex's group (or whole match) in the id, e.g. "
        "'id:^(airline-task\\d+)'. None: a line's 'group' where it has one, else its id."
    )

    @field_validator("split_by")
    @classmethod
    def _id_rule(cls, value: str | None) -> str | None:
        if value is None or not value.startswith(ID_RULE) or value == ID_TRIAL:
            return value
        try:
            pattern = re.compile(value[len(ID_RULE) :])
        except re.error as err:
            raise ValueError(f"'{value}': not a regular expression ({err})") from None
        if pattern.groups > 1:
            raise ValueError(f"'{value}': the pattern has {pattern.groups} groups; give one (the group) or none")
        return value

    system_prompt: Literal["keep", "drop"] = Field(
        description="The recorded agent's system (and developer) messages: keep them as the prompt's standing "
        "instructions (cut at prompt.max_context_chars), or drop them."
    )
    history_k: int = Field(
        ge=0, description="Past steps the prompt shows for this benchmark (prompt.history_k follows it)."
    )
    on_bad_trace: Literal["stop", "skip"] = Field(
        description="A line that is not a valid trace: stop the read naming file:line:field, or skip it and count "
        "it by reason (manifest counts 'skipped', one printed line per reason)."
    )


CONFIG = TracesConfig


class _Line:
    """Where a record comes from, for error messages."""

    def __init__(self, path: Path, lineno: int) -> None:
        self.path, self.lineno = path, lineno

    def error(self, field: str, msg: str) -> TraceError:
        return TraceError(f"{self.path}:{self.lineno}: field '{field}': {msg}", field, msg)


class TraceError(RecordError):
    """A line that is not a valid trace.

    The message names file, line and field; ``reason`` is the same for every line with this fault (indices left
    out), for counting skipped lines.
    """

    def __init__(self, message: str, field: str, msg: str) -> None:
        super().__init__(message)
        where = _INDEX.sub("[]", field)
        self.reason = f"{where}: {msg.split(' (')[0]}"


def tool_template(tool: dict[str, Any]) -> str:
    """The admissible-list entry of one tool: its name and a ``<arguments: ...>`` slot naming the parameters.

    Arguments the schema does not name are allowed, as JSON Schema allows them, unless it says
    ``"additionalProperties": false``; the entry then ends with ``...``
    (:data:`~nemo_act.rewards.tool_calls.MORE`). A tool that takes no arguments at all is ``name({})``.

    >>> tool_template({"name": "get_weather", "parameters": {"properties": {"city": {"type": "string"}},
    ...                "required": ["city"], "additionalProperties": False}})
    'get_weather(<arguments: {"city": string}>)'
    >>> tool_template({"name": "get_weather", "parameters": {"properties": {"city": {"type": "string"}}}})
    'get_weather(<arguments: {"city"?: string, ...}>)'
    """
    params = tool.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    more = params.get("additionalProperties", True) is not False
    if not props and not more:
        return f"{tool['name']}({{}})"
    required = set(params.get("required") or [])
    fields = [f'"{key}"{"" if key in required else "?"}: {_value(spec)}' for key, spec in sorted(props.items())]
    return f"{tool['name']}(<arguments: {{{', '.join(fields + [MORE] * more)}}}>)"


def _value(spec: Any) -> str:
    """What an argument may be, as a template shows it: its allowed values (an enum), its type(s), or ``any``."""
    spec = spec if isinstance(spec, dict) else {}
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return "|".join(json.dumps(v, ensure_ascii=False) for v in spec["enum"])
    kind = spec.get("type", "any")
    return "|".join(kind) if isinstance(kind, list) else str(kind)


def _text(content: Any, where: _Line, field: str) -> str:
    """A message's text: a string, null, or a list of OpenAI content parts (``{"type": "text", "text": ...}``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
                raise where.error(f"{field}[{i}]", "expected a content part {'type': 'text', 'text': ...}")
            texts.append(part.get("text", ""))
        return "\n".join(t for t in texts if t).strip()
    raise where.error(field, f"expected text, null or a list of content parts, got {type(content).__name__}")


def _tool_text(content: Any, where: _Line, field: str) -> str:
    """A tool result's text: as :func:`_text`, and a JSON object or array (not content parts) as its JSON."""
    parts = isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content)
    if isinstance(content, dict) or (isinstance(content, list) and not parts):
        return json.dumps(content, ensure_ascii=False, sort_keys=True)
    return _text(content, where, field)


def _tools(value: Any, where: _Line) -> list[dict[str, Any]]:
    """The tools as ``{"name", "parameters"}`` dicts (OpenAI's ``{"type": "function", "function": ...}`` or flat)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.error("tools", "expected a list of tool schemas")
    tools = []
    for i, tool in enumerate(value):
        spec = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
            raise where.error(f"tools[{i}].function.name", "every tool needs a name")
        if not isinstance(spec.get("parameters") or {}, dict):
            raise where.error(f"tools[{i}].function.parameters", "expected a JSON schema object")
        tools.append(spec)
    return tools


def _calls(message: dict[str, Any], where: _Line, field: str) -> list[tuple[str, str, str]]:
    """An assistant message's tool calls as (call id, name, canonical text); legacy ``function_call`` too."""
    raw = message.get("tool_calls")
    if raw is None and message.get("function_call") is not None:
        raw, field = [{"id": None, "function": message["function_call"]}], f"{field}.function_call"
        entries = [(field, raw[0])]
    else:
        if raw is not None and not isinstance(raw, list):
            raise where.error(f"{field}.tool_calls", "expected a list")
        entries = [(f"{field}.tool_calls[{i}]", c) for i, c in enumerate(raw or [])]
    out = []
    for f, call in entries:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise where.error(f"{f}.function.name", "a tool call needs a function name")
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as err:
                raise where.error(f"{f}.function.arguments", f"not valid JSON: {err.msg}") from None
        if not isinstance(args, dict):
            raise where.error(f"{f}.function.arguments", "expected a JSON object")
        out.append((call.get("id"), fn["name"], canonical_call(fn["name"], args)))
    return out


def _answered_call(msg: dict[str, Any], call_names: dict[str, str], called: list[str], where: _Line, field: str) -> str:
    """The name of the tool a tool message answers.

    That of the call its ``tool_call_id`` names, else its own ``name`` (legacy ``function`` messages) when an
    earlier assistant turn called that tool.

    Raises:
        TraceError: The message answers no call of an earlier assistant turn (its tool would be lost).
    """
    cid = msg.get("tool_call_id")
    if cid is not None:
        if cid not in call_names:
            raise where.error(f"{field}.tool_call_id", f"'{cid}' answers no tool call of an earlier assistant turn")
        return msg.get("name") or call_names[cid]
    name = msg.get("name")
    if not name:
        raise where.error(f"{field}.tool_call_id", "a tool result needs the tool_call_id of the call it answers")
    if name not in called:
        raise where.error(f"{field}.name", f"'{name}' answers no tool call of an earlier assistant turn")
    return name


def id_group(trace_id: str, split_by: str, where: _Line) -> str:
    """The group an ``id:`` rule of ``benchmark.split_by`` reads in a trace id.

    ``id:trial``: the id less a trailing trial number (:func:`trial_stem`; an id without one is its own group).
    ``id:REGEX``: the regex's group, or its whole match where it has none (``re.search``).

    Raises:
        TraceError: The regex does not match the id.
    """
    if split_by == ID_TRIAL:
        return trial_stem(trace_id) or trace_id
    m = re.search(split_by[len(ID_RULE) :], trace_id)
    if m is None or not m.group(m.re.groups and 1):
        raise where.error("id", f"benchmark.split_by={split_by} finds no group in the id '{trace_id}'")
    return m.group(m.re.groups and 1)


def group_of(record: dict[str, Any], where: _Line, split_by: str | None) -> str | None:
    """The group a trace is split with.

    ``record[split_by]`` or ``record["metadata"][split_by]``; with an ``id:`` rule, the group the id names
    (:func:`id_group`); without ``split_by`` the line's ``group`` (None where it has none: the trace is its own
    group).

    Raises:
        TraceError: ``split_by`` is set and the line has no such key, or the value is not a string or integer.
    """
    meta = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    if split_by and split_by.startswith(ID_RULE):
        trace_id = record.get("id", f"{where.path.stem}:{where.lineno}")
        if not isinstance(trace_id, str) or not trace_id:
            return None  # read_trace names the bad id
        return id_group(trace_id, split_by, where)
    if split_by:
        field = split_by if split_by in record else f"metadata.{split_by}"
        value = record.get(split_by, meta.get(split_by))
        if value is None:
            raise where.error(field, f"benchmark.split_by names '{split_by}' and this line has none")
    elif "group" in record:
        field, value = "group", record["group"]
    else:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
        raise where.error(field, "expected a non-empty string or an integer (the trace's group)")
    return str(value)


_TOOL_ROLES = ("tool", "function")


def _role(msg: Any, where: _Line, field: str) -> str:
    """A message's role, one the reader knows (else an error naming the message)."""
    if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
        raise where.error(f"{field}.role", "every message needs a role")
    role = msg["role"]
    if role not in (*_SYSTEM_ROLES, "user", *_TOOL_ROLES, "assistant"):
        raise where.error(f"{field}.role", f"unknown role '{role}' (system, developer, user, assistant, tool)")
    return role


def _assistant_turn(
    msg: dict[str, Any], where: _Line, field: str, call_names: dict[str, str], called: list[str]
) -> tuple[str, list[tuple[str, str, str]], bool]:
    """An assistant turn: (its action, its calls, whether it is a refusal); the calls noted for the tool turns.

    The action is the turn's tool calls joined by :data:`CALL_SEPARATOR`, else its text, else its ``refusal``
    (OpenAI's refusal turn, content null: the agent declined, in text).
    """
    calls = _calls(msg, where, field)
    call_names.update({cid: name for cid, name, _ in calls if cid})
    called.extend(name for _, name, _ in calls)
    action = CALL_SEPARATOR.join(c for _, _, c in calls) or _text(msg.get("content"), where, f"{field}.content")
    refused = False
    if not action and isinstance(msg.get("refusal"), str) and msg["refusal"].strip():
        action, refused = msg["refusal"].strip(), True
    if not action:
        raise where.error(f"{field}.content", "an assistant turn with neither text nor tool calls")
    return action, calls, refused


def _step(pending: list[str], action: str, calls: list[tuple[str, str, str]], templates: list[str]) -> Step:
    """The expert step an assistant turn makes: what came since the last one, its action, whether admissible."""
    return Step(
        observation="\n".join(pending) or "(no new observation)",
        action=action,
        admissible_actions=templates,
        action_admissible=all(in_actions(c, templates) for c in ([c for _, _, c in calls] or [action])),
    )


def _split_of(
    record: dict[str, Any], trace_id: str | int, group: str | None, heldout_share: float, where: _Line
) -> str:
    """A trace's split: its ``split``, else ``dev`` for ``heldout_share`` of ids (of groups) by a hash, else train."""
    split = record.get("split")
    if split is None:
        key = trace_id if group is None else f"group:{group}"
        return "dev" if key_int("traces-split", key) / 2**64 < heldout_share else "train"
    if not isinstance(split, str) or not split:
        raise where.error("split", "expected a non-empty string")
    return split


def read_trace(
    record: Any,
    where: _Line,
    heldout_share: float,
    group: str | None = None,
    system_prompt: str = "keep",
    counts: dict[str, int] | None = None,
) -> Trajectory:
    """One JSONL record as an expert trajectory (see the module docstring for the format).

    Args:
        record: The parsed line.
        where: File and line, for errors.
        heldout_share: Share of traces (of groups, where traces are grouped) without a ``split`` put in ``dev``.
        group: The trace's group (:func:`group_of`); None: its id.
        system_prompt: ``keep``: the system and developer messages become the trajectory's ``context``; ``drop``.
        counts: Where given, ``refusal_turns`` is added to (assistant turns read from their ``refusal``).

    Raises:
        RecordError: Naming the file, line and field.
    """
    refusals = 0
    if not isinstance(record, dict):
        raise where.error("<line>", "expected a JSON object with 'messages'")
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        raise where.error("messages", "expected a non-empty list of chat messages")
    trace_id = record.get("id", f"{where.path.stem}:{where.lineno}")
    if not isinstance(trace_id, str | int) or trace_id == "":
        raise where.error("id", "expected a non-empty string")
    tools = _tools(record.get("tools"), where)
    templates = [*(tool_template(t) for t in tools), REPLY_ENTRY] if tools else []
    task: str | None = None
    context: list[str] = []
    pending: list[str] = []
    call_names: dict[str, str] = {}
    called: list[str] = []
    steps: list[Step] = []
    for i, msg in enumerate(messages):
        field = f"messages[{i}]"
        role = _role(msg, where, field)
        if role in _SYSTEM_ROLES:
            if system_prompt == "keep" and (text := _text(msg.get("content"), where, f"{field}.content")):
                context.append(text)
        elif role == "user":
            text = _text(msg.get("content"), where, f"{field}.content")
            task = text if task is None else task
            pending.append(f"User: {text}")
        elif role in _TOOL_ROLES:
            pending.append(f"Tool {_answered_call(msg, call_names, called, where, field)}: "
                           f"{_tool_text(msg.get('content'), where, f'{field}.content')}")  # fmt: skip
        else:
            action, calls, refused = _assistant_turn(msg, where, field, call_names, called)
            refusals += refused
            if task is None:  # a greeting before the user's first message: history, not a step (there is no task)
                pending.append(f"Assistant: {action}")
                continue
            steps.append(_step(pending, action, calls, templates))
            pending = []
    if not steps:
        raise where.error("messages", "no assistant turn after a user message: a trace needs one expert step")
    if counts is not None and refusals:
        counts["refusal_turns"] = counts.get("refusal_turns", 0) + refusals
    split = _split_of(record, trace_id, group, heldout_share, where)
    return Trajectory(
        trajectory_id=f"traces/{trace_id}",
        benchmark="traces",
        task_id=str(trace_id),
        variation=None,
        split=split,
        task_description=task or "",
        context="\n\n".join(context),
        origin=f"{where.path}:{where.lineno}",
        steps=steps,
        score=100.0,
        success=True,
        source=SOURCE,
    )


def read_traces(
    path: str | Path,
    heldout_share: float,
    skipped: dict[str, list[int]] | None = None,
    split_by: str | None = None,
    groups: dict[str, set[str]] | None = None,
    system_prompt: str = "keep",
    counts: dict[str, Any] | None = None,
) -> list[Trajectory]:
    """Every trace of a JSONL file, in file order (blank lines skipped).

    Args:
        path: The JSONL file.
        heldout_share: Share of traces (groups) without a ``split`` that go to ``dev``.
        skipped: Where given (``benchmark.on_bad_trace: skip``), a bad line is left out and its number recorded
            here under its reason (:attr:`TraceError.reason`, ``not valid JSON``...) instead of stopping the read.
        split_by: ``benchmark.split_by`` (:func:`group_of`).
        groups: Where given, filled with each split's groups (a trace without a group counts as its own).
        system_prompt: ``benchmark.system_prompt`` (:func:`read_trace`).
        counts: Where given, filled with what the file's shapes were: ``refusal_turns`` (:func:`read_trace`) and
            ``traces_without_group`` (traces that name no group).

    Raises:
        RecordError: A line is not valid UTF-8 or JSON, or not a valid trace; or two lines share an id (unless
            ``skipped`` is given).
    """
    path = Path(path)
    trajs: list[Trajectory] = []
    seen: dict[str, int] = {}
    for lineno, record in iter_json(path, skipped):
        where = _Line(path, lineno)
        try:
            group = group_of(record, where, split_by) if isinstance(record, dict) else None
            traj = read_trace(record, where, heldout_share, group, system_prompt, counts)
            if traj.task_id in seen:
                raise where.error("id", f"'{traj.task_id}' is also the id of line {seen[traj.task_id]}")
        except TraceError as err:
            if skipped is None:
                raise
            skipped.setdefault(err.reason, []).append(lineno)
            continue
        seen[traj.task_id] = lineno
        trajs.append(traj)
        if groups is not None:
            groups.setdefault(traj.split, set()).add(f"group:{group}" if group is not None else traj.task_id)
        if counts is not None and group is None:
            counts["traces_without_group"] = counts.get("traces_without_group", 0) + 1
    return trajs


_TRIAL = re.compile(r"[-_.:](?:t|trial|try|run|attempt|sample)\d+$", re.IGNORECASE)


def trial_stem(trace_id: str) -> str | None:
    """``trace_id`` less a trailing trial number (``cancel-1234-t0`` -> ``cancel-1234``); None where it has none.

    >>> trial_stem("cancel-mia_lopez_2041-t0"), trial_stem("trip-001")
    ('cancel-mia_lopez_2041', None)
    """
    m = _TRIAL.search(trace_id)
    return trace_id[: m.start()] if m else None


def _trials_across_splits(trajs: Sequence[Trajectory]) -> dict[str, Any]:
    """Ids that look like trials of one task (:func:`trial_stem`), and how many such tasks sit in several splits."""
    splits: dict[str, set[str]] = {}
    for t in trajs:
        if (stem := trial_stem(t.task_id)) is not None:
            splits.setdefault(stem, set()).add(t.split)
    several = sorted(stem for stem, s in splits.items() if len(s) > 1)
    return {"trial_tasks": len(splits), "trial_tasks_in_several_splits": len(several), "trial_example": several[:1]}


# ---- the benchmark protocol (nemo_act/benchmarks/base.py) ------------------------------------------------------
def episodes(
    cfg: TracesConfig, split: str, tasks: Sequence[str] | None, max_variations: int | None
) -> list[tuple[str, int]]:
    """The traces of a split as episodes (for listing; there is no env to play them in)."""
    return [(t.task_id, 0) for t in _read(cfg) if t.split == split and (not tasks or t.task_id in tasks)]


def env_factory(cfg: TracesConfig, expert: bool) -> None:
    """None: traces have no simulator (evaluation is held-out selection accuracy)."""
    return None


def _path(cfg: TracesConfig) -> Path:
    if not cfg.path:
        raise FileNotFoundError("benchmark=traces needs the traces file: benchmark.path=FILE (JSONL chat traces)")
    path = Path(cfg.path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"benchmark.path: {path} is not a file")
    return path


def _read(
    cfg: TracesConfig,
    skipped: dict[str, list[int]] | None = None,
    groups: dict[str, set[str]] | None = None,
    counts: dict[str, Any] | None = None,
) -> list[Trajectory]:
    """The file's traces; with ``on_bad_trace: skip`` bad lines go to ``skipped`` (a new dict where None)."""
    if cfg.on_bad_trace == "stop":
        skipped = None
    elif skipped is None:
        skipped = {}
    return read_traces(_path(cfg), cfg.heldout_share, skipped, cfg.split_by, groups, cfg.system_prompt, counts)


def read_experts(cfg: TracesConfig, split: str) -> tuple[list[Trajectory], dict[str, Any]]:
    """The traces of ``split`` and what they were read from (file and its SHA-256, for the manifest).

    Raises:
        ValueError: The split has no trace (the message gives the splits the file has).
    """
    path = _path(cfg)
    skipped: dict[str, list[int]] = {}
    groups: dict[str, set[str]] = {}
    shapes: dict[str, Any] = {}
    trajs = _read(cfg, skipped, groups, shapes)
    kept = [t for t in trajs if t.split == split]
    if not kept:
        splits = sorted({t.split for t in trajs})
        raise ValueError(f"{path}: no trace in split '{split}' (the file has {splits}; see benchmark.heldout_share)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    # how many groups each side has: a group on both sides (explicit 'split' fields) would leak its task
    counts: dict[str, Any] = {"groups": {name: len(g) for name, g in sorted(groups.items())}}
    both = set.intersection(*groups.values()) if len(groups) > 1 else set()
    counts["groups_in_several_splits"] = len(both)
    counts["refusal_turns"] = shapes.get("refusal_turns", 0)
    counts["traces_without_group"] = shapes.get("traces_without_group", 0)
    counts["traces_in_file"] = len(trajs)
    if counts["traces_without_group"] == len(trajs):  # no group anywhere: do the ids say which traces are one task?
        counts |= _trials_across_splits(trajs)
    source: dict[str, Any] = {"traces": str(path), "sha256": digest, "counts": counts, "shown_as": str(path)}
    if skipped:
        source["skipped"] = skipped
    return kept, source


def expert_warnings(counts: dict[str, Any]) -> list[str]:
    """What is wrong with a traces file's splits, each with the setting that fixes it.

    ``nemo-act experts``, ``run`` and ``pairs`` print these (:func:`nemo_act.steps.experts.data_warnings`).
    """
    lines = []
    if counts.get("trial_tasks_in_several_splits"):
        example = f" (e.g. '{counts['trial_example'][0]}')" if counts.get("trial_example") else ""
        lines.append(
            f"{counts['trial_tasks_in_several_splits']} tasks have trials in several splits{example}: held-out "
            f"selection would score tasks the model trained on; set benchmark.split_by={ID_TRIAL} (or a key or "
            f"an id:REGEX naming the task)"
        )
    if counts.get("groups_in_several_splits"):
        lines.append(
            f"{counts['groups_in_several_splits']} groups have traces in several splits (their lines' 'split' "
            "fields differ): held-out selection would score groups the model trained on; give each group's lines "
            "one 'split', or drop the field and let benchmark.heldout_share split by group"
        )
    return lines


def expert_summary(counts: dict[str, Any]) -> list[str]:
    """What ``nemo-act experts`` prints of a traces file's own counts: its groups per split, refusal turns."""
    lines = []
    if counts.get("groups") and counts.get("traces_without_group", 0) < counts.get("traces_in_file", 1):
        per_split = ", ".join(f"{split} {n}" for split, n in counts["groups"].items())
        lines.append(f"groups per split: {per_split} ({counts.get('groups_in_several_splits', 0)} in several splits)")
    elif "trial_tasks" in counts:  # no trace named a group: each was split on its own
        line = "groups: none found (no benchmark.split_by, no 'group' field): each trace was split on its own"
        if counts["trial_tasks"]:
            example = f", e.g. '{counts['trial_example'][0]}'" if counts["trial_example"] else ""
            line += (
                f"; the ids look like trials (a trailing -t0, -trial1, ...) of {counts['trial_tasks']} tasks, "
                f"{counts['trial_tasks_in_several_splits']} of them with trials in several splits{example}: "
                f"set benchmark.split_by={ID_TRIAL} to split each task's trials together"
            )
        lines.append(line)
    if counts.get("refusal_turns"):
        lines.append(f"refusal turns (content null, a 'refusal' text) read as text replies: {counts['refusal_turns']}")
    return lines
