"""The traces benchmark: a user's own chat/tool-call trajectories as expert data, end to end.

The example file (``nemo_act/benchmarks/examples/travel_desk.jsonl``) is ours: invented travel-desk
conversations in OpenAI's chat format (``tool_calls`` with JSON-string arguments, ``tool`` results).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_act.benchmarks.traces import REPLY_ENTRY, canonical_call, read_traces, tool_template
from nemo_act.config.load import load_config
from nemo_act.data.io import RecordError, read_jsonl
from nemo_act.data.records import Pair, Trajectory
from nemo_act.kinds.imitation import il_rows
from nemo_act.prompts.state import state_id, trajectory_state
from nemo_act.rewards import in_actions

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "nemo_act" / "benchmarks" / "examples" / "travel_desk.jsonl"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def _line(messages, **extra) -> str:
    return json.dumps({"messages": messages, **extra}) + "\n"


def _trace(city_args: str = '{"days": 2, "city": "Oslo"}') -> list[dict]:
    return [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Rain in Oslo?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": city_args}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"rain_mm": 4}'},
        {"role": "assistant", "content": "Yes, 4 mm."},
    ]


def test_a_trace_becomes_steps_with_canonical_calls(tmp_path):
    """Each assistant turn is a step; a call's arguments are keyed in sorted order whatever the file's order;
    the tool result is the next observation under the tool's name; a text reply is the last action."""
    f = tmp_path / "t.jsonl"
    f.write_text(_line(_trace(), id="w1", tools=[WEATHER], split="train"))
    (traj,) = read_traces(f, 0.2)
    assert traj.task_description == "Rain in Oslo?" and traj.split == "train" and traj.trajectory_id == "traces/w1"
    first, last = traj.steps
    assert first.observation == "User: Rain in Oslo?"
    assert first.action == 'get_weather({"city": "Oslo", "days": 2})'  # commentary text dropped, keys sorted
    assert last.observation == 'Tool get_weather: {"rain_mm": 4}' and last.action == "Yes, 4 mm."
    entry = 'get_weather(<arguments: {"city": string, "days"?: integer, ...}>)'  # "...": its schema allows more
    assert first.admissible_actions == [entry, REPLY_ENTRY]
    assert first.action_admissible and last.action_admissible  # a listed tool's call; a text reply
    f.write_text(_line(_trace(), id="w1"))  # no tool list: nothing is admissible, nothing listed
    assert [(s.admissible_actions, s.action_admissible) for s in read_traces(f, 0.2)[0].steps] == [([], False)] * 2
    # the same call with other argument order and spacing is the same action
    f.write_text(_line(_trace('{"city":"Oslo",   "days":2}'), id="w1", tools=[WEATHER], split="train"))
    assert read_traces(f, 0.2)[0].steps[0].action == first.action


def test_template_entries_match_calls_of_their_tool_only():
    entry = tool_template(WEATHER["function"])
    assert in_actions(canonical_call("get_weather", {"city": "Lima"}), [entry])
    assert not in_actions(canonical_call("book_flight", {"flight_id": "X1"}), [entry])
    assert not in_actions("The weather is fine.", [entry])
    assert in_actions("search[red shoes]", ["search[<query>]", "click[back to search]"])
    assert not in_actions("search[]", ["search[<query>]"])  # a slot stands for some text
    assert in_actions("now()", [tool_template({"name": "now"})]) is False  # no arguments: 'now({})' exactly
    assert in_actions("now({})", [tool_template({"name": "now"})])


CABIN = {
    "name": "book_flight",
    "parameters": {
        "type": "object",
        "required": ["flight_id", "cabin"],
        "properties": {
            "flight_id": {"type": "string"},
            "cabin": {"enum": ["economy", "business"]},
            "seats": {"type": "integer"},
        },
    },
}


@pytest.mark.parametrize(
    ("action", "admissible"),
    [
        ('get_weather({"city": "Oslo"})', True),
        ('get_weather({"city": "Oslo", "days": 2}); book_flight({"flight_id": "X1", "cabin": "business"})', True),
        ("Sure, it will rain in Oslo.", True),  # a text reply
        ('delete_database({"x": 1})', False),  # a tool that is not listed
        ('get_weather({"city": "Oslo"', False),  # bad JSON
        ("get_weather(", False),  # call-shaped garbage
        ('get_weather({"days": 2})', False),  # a required argument missing
        ('get_weather({"city": 3})', False),  # a mistyped argument
        ('book_flight({"flight_id": "X1", "cabin": "first"})', False),  # outside the enum
        ('get_weather({"city": "Oslo"}); get_weather({"town": "Bergen"})', False),  # one of two calls bad
        ('get_weather(["Oslo"])', False),  # arguments not an object
        ("", False),  # an empty reply
    ],
)
def test_admissible_means_a_listed_tool_with_valid_arguments_or_text(action, admissible):
    """The rule every admissibility check follows (the reader's flag, pair candidates, both engines' R_adm): a
    call of a listed tool whose arguments validate against its entry, or text that is not call-shaped."""
    from nemo_act.config.schema import RewardValues
    from nemo_act.rewards import action_reward

    entries = [tool_template(WEATHER["function"]), tool_template(CABIN), REPLY_ENTRY]
    assert 'book_flight(<arguments: {"cabin": "economy"|"business", "flight_id": string' in entries[1]
    assert in_actions(action, entries) is admissible
    values = RewardValues(correct=1.0, admissible=0.1, malformed=-1.0)
    reward = action_reward(f"<action>{action}</action>", 'get_weather({"city": "Lima"})', entries, values, True)
    assert reward.admissible == (0.1 if admissible else 0.0) and reward.accuracy == 0.0


def test_a_recorded_call_of_an_unlisted_tool_is_not_admissible(tmp_path):
    f = tmp_path / "log.jsonl"
    bad = _trace('{"city": "Oslo"}')
    bad[2]["tool_calls"][0]["function"]["name"] = "get_forecast"
    bad[3]["tool_call_id"] = "c1"
    f.write_text(_line(_trace(), id="ok", tools=[WEATHER]) + _line(bad, id="bad", tools=[WEATHER]))
    ok, wrong = read_traces(f, 0.2)
    assert [s.action_admissible for s in ok.steps] == [True, True]
    assert [s.action_admissible for s in wrong.steps] == [False, True]


def test_the_example_file_reads_with_a_stable_heldout_split():
    trajs = read_traces(EXAMPLE, 0.2)
    assert len(trajs) == 60 and len({t.task_id for t in trajs}) == 60
    dev = [t.task_id for t in trajs if t.split == "dev"]
    assert 3 <= len(dev) <= 21  # ~20% by a hash of the id
    assert dev == [t.task_id for t in read_traces(EXAMPLE, 0.2) if t.split == "dev"]  # stable
    assert not [t for t in read_traces(EXAMPLE, 0.0) if t.split == "dev"]
    parallel = [s.action for t in trajs for s in t.steps if "; " in s.action and s.action.startswith("get_weather(")]
    assert parallel and all("search_flights(" in a for a in parallel)  # two calls in one turn: one action
    assert all(s.action_admissible for t in trajs for s in t.steps)  # every call names a listed tool


@pytest.mark.parametrize(
    ("record", "where"),
    [
        ('{"messages": [', ":1: not valid JSON"),
        ('{"id": "a"}', ":1: field 'messages'"),
        (_line(_trace('{"city": "Oslo"')), ":1: field 'messages[2].tool_calls[0].function.arguments': not valid JSON"),
        (_line(_trace('["Oslo"]')), ":1: field 'messages[2].tool_calls[0].function.arguments': expected a JSON object"),
        (_line([{"role": "assistant", "content": "hi"}]), ":1: field 'messages': no assistant turn after a user"),
        (
            _line([*_trace()[:4], {"role": "tool", "tool_call_id": "c9", "content": "x"}, _trace()[4]]),
            "field 'messages[4].tool_call_id': 'c9' answers no tool call of an earlier assistant turn",
        ),
        (
            _line([_trace()[1], {"role": "tool", "content": "sunny"}, _trace()[4]]),
            "field 'messages[1].tool_call_id': a tool result needs the tool_call_id",
        ),
        (
            _line([_trace()[1], {"role": "function", "name": "get_weather", "content": "sunny"}, _trace()[4]]),
            "field 'messages[1].name': 'get_weather' answers no tool call of an earlier assistant turn",
        ),
        (_line([{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]), "field 'messages[1].role'"),
        (_line([{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]), "'messages[1].content'"),
        (_line([{"role": "user", "content": "hi"}]), "field 'messages': no assistant turn after a user message"),
        (_line(_trace(), tools=[{"type": "function", "function": {}}]), "field 'tools[0].function.name'"),
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path, record, where):
    f = tmp_path / "bad.jsonl"
    f.write_text(_line(_trace(), id="ok") + record.rstrip("\n").replace("\n", " ") + "\n")
    with pytest.raises(RecordError) as err:
        read_traces(f, 0.2)
    assert str(err.value).startswith(f"{f}:2") and where.replace(":1:", ":2:") in str(err.value), err.value


def test_duplicate_ids_and_bad_bytes_are_named(tmp_path):
    f = tmp_path / "dup.jsonl"
    f.write_text(_line(_trace(), id="x") + "\n" + _line(_trace(), id="x"))
    with pytest.raises(RecordError, match=r"dup.jsonl:3: field 'id': 'x' is also the id of line 1"):
        read_traces(f, 0.2)
    f.write_bytes(_line(_trace(), id="y").encode() + b'{"messages": "\xff"}\n')
    with pytest.raises(RecordError, match=r"dup.jsonl:2: not UTF-8 text"):
        read_traces(f, 0.2)


def test_real_log_shapes_read(tmp_path):
    """What service logs hold: a byte order mark, a greeting before the user's first message (history, not a step;
    the task is the user's message), a tool result given as a JSON object (kept as its JSON), a legacy
    ``function`` message answering a call by name."""
    greeting = {"role": "assistant", "content": "Hello! How can I help?"}
    legacy = [*_trace()[:3], {"role": "function", "name": "get_weather", "content": {"rain_mm": 4, "city": "Oslo"}},
              _trace()[4]]  # fmt: skip
    f = tmp_path / "log.jsonl"
    f.write_bytes(b"\xef\xbb\xbf" + _line([_trace()[0], greeting, *_trace()[1:]], id="a").encode()
                  + _line(legacy, id="b").encode())  # fmt: skip
    first, second = read_traces(f, 0.2)
    assert first.task_description == "Rain in Oslo?" and len(first.steps) == 2
    assert first.steps[0].observation == "Assistant: Hello! How can I help?\nUser: Rain in Oslo?"
    assert second.steps[1].observation == 'Tool get_weather: {"city": "Oslo", "rain_mm": 4}'


def test_bad_lines_are_skipped_and_counted_when_asked(tmp_path, capsys):
    """``benchmark.on_bad_trace=skip``: the good traces are the experts, each bad line is counted under its reason
    in the manifest and printed with its line numbers; the default stops at the first bad line."""
    from nemo_act.data.manifest import read_manifest
    from nemo_act.steps.experts import collect_experts

    empty_turn = [_trace()[1], {"role": "assistant", "content": ""}]
    lines = [_line(_trace(), id="a", split="train"), _line(empty_turn, id="b"), "{oops\n",
             _line(_trace(), id="c", split="train"), _line(empty_turn, id="d")]  # fmt: skip
    f = tmp_path / "log.jsonl"
    f.write_text("".join(lines))
    base = ["benchmark=traces", f"benchmark.path={f}"]
    with pytest.raises(RecordError, match=r"log.jsonl:2: field 'messages\[1\].content'"):
        collect_experts(load_config(overrides=base), "train", tmp_path / "stop.jsonl")
    out = tmp_path / "experts.jsonl"
    summary = collect_experts(load_config(overrides=[*base, "benchmark.on_bad_trace=skip"]), "train", out)
    assert [t.task_id for t in read_jsonl(out, Trajectory)] == ["a", "c"] and summary.counts["episodes"] == 2
    reason = "messages[].content: an assistant turn with neither text nor tool calls"
    assert read_manifest(out)["counts"]["skipped"] == {reason: 2, "not valid JSON": 1}
    err = capsys.readouterr().err
    assert f"skipped 2 line(s) of {f}: {reason} (line 2, 5)" in err and "not valid JSON (line 3)" in err


def test_trials_of_one_task_stay_on_one_side_of_the_split(tmp_path):
    """Real logs repeat tasks: split by a hash of the id, trials of one task land on both sides (a leak); with
    ``benchmark.split_by`` every group is on one side, and the experts manifest counts each side's groups."""
    from nemo_act.data.manifest import read_manifest
    from nemo_act.steps.experts import collect_experts

    f = tmp_path / "trials.jsonl"
    f.write_text("".join(_line(_trace(), id=f"t{task}-{trial}", metadata={"task": f"task-{task}"})
                         for task in range(12) for trial in range(3)))  # fmt: skip
    by_id = read_traces(f, 0.3)
    sides = {}
    for t in by_id:
        sides.setdefault(t.task_id.split("-")[0], set()).add(t.split)
    assert any(len(s) == 2 for s in sides.values())  # the leak a hash of the id gives
    cfg = load_config(overrides=["benchmark=traces", f"benchmark.path={f}", "benchmark.split_by=task",
                                 "benchmark.heldout_share=0.3"])  # fmt: skip
    out = tmp_path / "experts.jsonl"
    collect_experts(cfg, "train", out)
    heldout = tmp_path / "heldout.jsonl"
    collect_experts(cfg, "dev", heldout)
    train_tasks = {t.task_id.split("-")[0] for t in read_jsonl(out, Trajectory)}
    dev_tasks = {t.task_id.split("-")[0] for t in read_jsonl(heldout, Trajectory)}
    assert train_tasks and dev_tasks and not train_tasks & dev_tasks
    counts = read_manifest(out)["counts"]
    assert counts["groups"] == {"dev": len(dev_tasks), "train": len(train_tasks)}
    assert counts["groups_in_several_splits"] == 0 and counts["episodes"] == 3 * len(train_tasks)
    missing = load_config(overrides=["benchmark=traces", f"benchmark.path={f}", "benchmark.split_by=user"])
    with pytest.raises(RecordError, match=r"trials.jsonl:1: field 'metadata.user': benchmark.split_by names 'user'"):
        collect_experts(missing, "train", tmp_path / "none.jsonl")


def test_the_runner_prints_a_pairs_summary_per_split(tmp_path):
    """After pairs the runner prints a row per split from the pairs manifests: states, pairs, states without a pair,
    states skipped for a too-long expert action, samples dropped by reason (too long too), alternatives admissible
    (count and share)."""
    from rich.console import Console

    from nemo_act.data.manifest import write_manifest
    from nemo_act.run.pipeline import PipelineRunner

    files = {}
    for split, (states, pairs, adm) in {"train": (40, 90, 81), "held-out": (9, 20, 5)}.items():
        files[split] = tmp_path / f"{split}.jsonl"
        files[split].write_text("")
        counts = {"states": states, "pairs": pairs, "states_without_pair": 3, "dropped_unparsable": 7,
                  "dropped_duplicate": 11, "dropped_repeat": 2, "alternative_admissible": adm, "states_too_long": 1,
                  "dropped_too_long": 4, "dropped_template": 5}  # fmt: skip
        write_manifest(files[split], "pairs", params={}, counts=counts)
    console = Console(record=True, width=160)
    PipelineRunner(load_config(overrides=[f"run_dir={tmp_path}"]), console=console).print_pairs_summary(files)
    rows = [" ".join(line.replace("│", " ").split()) for line in console.export_text().splitlines()]
    assert "train 40 90 3 1 7 5 11 2 4 81 (90%)" in rows and "held-out 9 20 3 1 7 5 11 2 4 5 (25%)" in rows


def test_from_data_alternatives_are_real_calls_never_the_expert(tmp_path):
    """``pairs_policy=from_data`` on the example: every alternative is an expert action of the same file (a real
    call or reply, never a template as the random policy's are), admissible at its state, never the state's
    expert action; the same seed gives the same pairs; held-out pairs draw from the held-out file only."""
    from nemo_act.generation import make_generator
    from nemo_act.rewards import normalize_action
    from nemo_act.steps.experts import collect_experts
    from nemo_act.steps.pairs import collect_pairs

    cfg = load_config(overrides=["benchmark=traces", f"benchmark.path={EXAMPLE}", "pairs.k=3"])
    experts = tmp_path / "experts.jsonl"
    collect_experts(cfg, "train", experts)
    trajs = list(read_jsonl(experts, Trajectory))
    seen = {normalize_action(s.action) for t in trajs for s in t.steps}
    outs = []
    for name in ("a.jsonl", "b.jsonl"):
        collect_pairs(experts, make_generator("from_data", cfg, experts), cfg, tmp_path / name, progress=False)
        outs.append((tmp_path / name).read_text())
    assert outs[0] == outs[1] and outs[0]
    pairs = list(read_jsonl(tmp_path / "a.jsonl", Pair))
    steps = {f"{t.trajectory_id}/{i}": s for t in trajs for i, s in enumerate(t.steps)}
    for pair in pairs:
        alt = pair.candidates[1 - pair.expert_index]
        expert = pair.candidates[pair.expert_index]
        assert normalize_action(alt) in seen and "<arguments" not in alt
        assert normalize_action(alt) != normalize_action(expert)
        assert in_actions(alt, steps[pair.state_id].admissible_actions)
    assert len({p.candidates[1 - p.expert_index] for p in pairs}) > 10  # calls with many arguments, not templates
    with pytest.raises(ValueError, match="from_data draws ACT pair alternatives"):
        make_generator("from_data", cfg)


def test_prompts_list_templates_and_never_the_expert_action(tmp_path):
    """The shown list is the templates: the expert's call and its text reply are forced in as the entries
    they match, never spelled out (that would mark the expert); without tools the list stays empty."""
    f = tmp_path / "t.jsonl"
    f.write_text(_line(_trace(), id="w1", tools=[WEATHER]) + _line(_trace(), id="w2"))
    with_tools, without = read_traces(f, 0.2)
    for i in range(2):
        state = trajectory_state(with_tools, i, history_k=2, max_shown=50)
        assert state.admissible_actions == [tool_template(WEATHER["function"]), REPLY_ENTRY]
        assert trajectory_state(without, i, history_k=2, max_shown=50).admissible_actions == []
        small = trajectory_state(with_tools, i, history_k=2, max_shown=1)  # the bounded branch too
        assert with_tools.steps[i].action not in small.admissible_actions


def test_run_needs_the_file(tmp_path):
    from nemo_act.steps.experts import collect_experts

    cfg = load_config(overrides=["benchmark=traces"])
    with pytest.raises(FileNotFoundError, match="benchmark.path=FILE"):
        collect_experts(cfg, "train", tmp_path / "e.jsonl")


def test_experts_are_remade_when_the_file_changes(tmp_path):
    from nemo_act.steps.experts import collect_experts

    f = tmp_path / "t.jsonl"
    f.write_text(_line(_trace(), id="a", split="train"))
    cfg = load_config(overrides=["benchmark=traces", f"benchmark.path={f}"])
    out = tmp_path / "experts.jsonl"
    assert collect_experts(cfg, "train", out).counts["episodes"] == 1
    f.write_text(_line(_trace(), id="a", split="train") + _line(_trace(), id="b", split="train"))
    assert collect_experts(cfg, "train", out).counts["episodes"] == 2


@pytest.mark.heavy
def test_nemo_act_run_on_traces_end_to_end(tiny_model_dir, tmp_path):
    """`nemo-act run conf/pipeline/act_il.yaml benchmark=traces benchmark.path=FILE` on the local engine:
    experts and held-out experts from the file, pairs, ACT, IL, held-out selection before and after ACT,
    and no env evaluation (there is no simulator)."""
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "nemo_act.cli",
        "run",
        str(REPO / "conf" / "pipeline" / "act_il.yaml"),
        "benchmark=traces",
        f"benchmark.path={EXAMPLE}",
        f"model.name_or_path={tiny_model_dir}",
        "train=demo",
        "pipeline.pairs_policy=from_data",
        "train.act.max_steps=2",
        "train.il.max_steps=2",
        "train.il.logging_steps=1",
        f"run_dir={run}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "no env evaluation" in proc.stdout
    # what a person reads: one bar per stage (IL's with its loss), the held-out selection lines, no library noise
    out = proc.stdout + proc.stderr
    assert "01_act: 100%" in out and "02_il: 100%" in out and "loss=" in out
    assert "held-out selection, init:" in out and "held-out selection, 01_act:" in out
    assert "ACT pairs" in out and "states without a pair" in out  # the summary table after pairs
    assert "FutureWarning" not in out and "{'loss'" not in out and "Loading weights" not in out
    heldout = list(read_jsonl(run / "data" / "heldout_pairs.jsonl", Pair))
    assert heldout and {p.benchmark for p in heldout} == {"traces"}
    dev = {t.task_id for t in read_traces(EXAMPLE, 0.2) if t.split == "dev"}
    assert {p.state_id.split("/")[1] for p in heldout} <= dev  # held-out pairs come from held-out traces only
    for name in ("init", "01_act"):
        sel = json.loads((run / "selection" / f"{name}.json").read_text())
        assert sel["free"]["accuracy"]["n"] == len(heldout)
    for stage in ("01_act", "02_il"):
        assert json.loads((run / "stages" / stage / "stage.json").read_text())["complete"]
    log = json.loads((run / "run.json").read_text())
    assert log["eval"] == {} and log["final_checkpoint"].endswith("02_il")


@pytest.mark.heavy
def test_report_to_tensorboard_writes_event_files_beside_the_stage(tiny_model_dir, tmp_path):
    """``train.report_to=[tensorboard]`` logs through the trainer's TensorBoard integration into
    ``<stage>/tensorboard`` (kept: ``checkpoints/`` is removed when a stage finishes)."""
    from nemo_act.engines.local.stages import train_stage

    cfg = load_config(
        overrides=[
            "benchmark=traces", f"benchmark.path={EXAMPLE}", "train.report_to=[tensorboard]", "train.il.max_steps=2",
            "train.il.logging_steps=1", "train.il.batch_size=2", "train.il.grad_accum=1",
        ]
    )  # fmt: skip
    rows = il_rows(read_traces(EXAMPLE, 0.2)[:2], cfg)
    out = train_stage("il", str(tiny_model_dir), rows, cfg, tmp_path / "01_il")
    events = list((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert events and b"train/loss" in b"".join(e.read_bytes() for e in events)
    assert not (out / "checkpoints" / "runs").exists()


def test_the_system_prompt_is_kept_as_instructions_or_dropped(tmp_path):
    """``benchmark.system_prompt``: ``keep`` (the default) makes the recorded agent's system and developer messages
    the trajectory's context, shown under "Instructions:" before the task in every prompt kind and cut at
    ``prompt.max_context_chars``; ``drop`` shows none; the prompt is otherwise the same."""
    from nemo_act.prompts.render import generation_prompt, selection_prompt

    f = tmp_path / "t.jsonl"
    dev = {"role": "developer", "content": "Refunds need a receipt."}
    f.write_text(_line([*_trace()[:1], dev, *_trace()[1:]], id="w1", tools=[WEATHER], split="train"))
    cfg = load_config(overrides=["benchmark=traces", f"benchmark.path={f}"])
    assert cfg.benchmark.system_prompt == "keep"
    (kept,) = read_traces(f, 0.2)
    (dropped,) = read_traces(f, 0.2, system_prompt="drop")
    assert kept.context == "You are a weather bot.\n\nRefunds need a receipt." and dropped.context == ""
    for i in range(2):
        with_it = trajectory_state(kept, i, cfg.prompt.history_k, 50)
        without = trajectory_state(dropped, i, cfg.prompt.history_k, 50)
        for render in (lambda s: generation_prompt(s, "traces", cfg.prompt),
                       lambda s: selection_prompt(s, ["a()", "b()"], "traces", cfg.prompt)):  # fmt: skip
            text = render(with_it)
            assert f"Instructions:\n{kept.context}\nTask: Rain in Oslo?" in text
            assert render(without) == text.replace(f"Instructions:\n{kept.context}\n", "")
    short = cfg.prompt.model_copy(update={"max_context_chars": 12})
    assert "Instructions:\nYou are a...\nTask:" in generation_prompt(with_it, "traces", short)


def test_traces_show_a_longer_history_of_their_own(tmp_path):
    """Agent logs need the turns where the user gave an id: traces set ``benchmark.history_k`` (6), which
    ``prompt.history_k`` follows; other benchmarks keep 2; an explicit ``prompt.history_k`` wins."""
    assert load_config(overrides=["benchmark=traces"]).prompt.history_k == 6
    assert load_config(overrides=["benchmark=traces", "benchmark.history_k=9"]).prompt.history_k == 9
    assert load_config(overrides=["benchmark=traces", "prompt.history_k=3"]).prompt.history_k == 3
    assert load_config(overrides=["benchmark=alfworld"]).prompt.history_k == 2


def _with_huge_argument(tmp_path: Path, size: int = 10 * 2**20) -> Path:
    """The travel desk example plus one trace (line 3) whose second call carries a ``size``-character argument."""
    lines = EXAMPLE.read_text().splitlines(keepends=True)[:2]
    record = json.loads(lines[0])
    record.update(id="huge", split="train")
    call = next(m for m in record["messages"] if m.get("tool_calls"))["tool_calls"][0]["function"]
    args = json.loads(call["arguments"])
    args[sorted(args)[0]] = "x" * size
    call["arguments"] = json.dumps(args)
    f = tmp_path / "big.jsonl"
    f.write_text("".join([json.dumps({**json.loads(x), "split": "train"}) + "\n" for x in lines]) + json.dumps(record))
    return f


def test_an_action_over_its_budget_skips_its_state_names_the_line_and_is_never_drawn(tmp_path, capsys):
    """A 10 MB argument: the state whose expert action it is gets no pair (counted ``states_too_long``, named by
    file:line:step on stderr), from_data never offers it to another state, and the later states of its trace show
    it cut to ``prompt.max_action_chars`` in their history; no pair holds a candidate over ``max_candidate_chars``."""
    from nemo_act.data.manifest import read_manifest
    from nemo_act.generation import make_pairs_generator
    from nemo_act.prompts.render import generation_prompt
    from nemo_act.steps.experts import collect_experts
    from nemo_act.steps.pairs import collect_pairs

    f = _with_huge_argument(tmp_path)
    cfg = load_config(overrides=["benchmark=traces", f"benchmark.path={f}", "pairs.k=3"])
    experts, out = tmp_path / "experts.jsonl", tmp_path / "pairs.jsonl"
    collect_experts(cfg, "train", experts)
    collect_pairs(experts, make_pairs_generator("from_data", cfg, experts), cfg, out, progress=False)
    counts = read_manifest(out)["counts"]
    assert counts["states_too_long"] == 1 and counts["dropped_too_long"] == 0
    err = capsys.readouterr().err
    assert "skipped 1 of" in err and f"{f}:3 (step 1): expert action of 10,485,8" in err
    pairs = list(read_jsonl(out, Pair))
    assert pairs and max(len(c) for p in pairs for c in p.candidates) <= cfg.prompt.max_candidate_chars
    assert not any(p.state_id == "traces/huge/0" for p in pairs)
    huge = next(t for t in read_jsonl(experts, Trajectory) if t.task_id == "huge")
    later = generation_prompt(trajectory_state(huge, 1, cfg.prompt.history_k, 50), "traces", cfg.prompt)
    assert (
        len(later) < 20_000
        and "x" * (cfg.prompt.max_action_chars - 100) + "...\n" in later
        and "x" * cfg.prompt.max_action_chars not in later
    )


@pytest.mark.heavy
def test_from_data_alternatives_mix_with_the_policy_samples(tiny_model_dir, tmp_path):
    """``pairs.from_data_k``: each state gets the policy's K samples (a tiny model's) and then that many draws from
    the file's own actions (real calls and replies, never a template), reproducibly; the policy's name in the
    pairs says so."""
    from nemo_act.generation import make_pairs_generator
    from nemo_act.rewards import Admissible
    from nemo_act.steps.experts import collect_experts
    from nemo_act.steps.pairs import StateOutcome, collect_pairs

    overrides = ["benchmark=traces", f"benchmark.path={EXAMPLE}", "pairs.k=1", "pairs.from_data_k=2",
                 "pairs.sampling.max_new_tokens=8"]  # fmt: skip
    cfg = load_config(overrides=overrides)
    experts = tmp_path / "experts.jsonl"
    collect_experts(cfg, "train", experts)
    outs = []
    for name in ("a.jsonl", "b.jsonl"):
        gen = make_pairs_generator(str(tiny_model_dir), cfg, experts)
        assert gen.name == f"{tiny_model_dir}+from_data*2"
        collect_pairs(experts, gen, cfg, tmp_path / name, progress=False)
        outs.append((tmp_path / name).read_text())
    assert outs[0] == outs[1]
    states = list(read_jsonl(tmp_path / "a.jsonl.states.jsonl", StateOutcome))
    assert {len(s.samples) for s in states} == {3}
    steps = {state_id(t, i): s for t in read_jsonl(experts, Trajectory) for i, s in enumerate(t.steps)}
    draws = [(s.state_id, x.removeprefix("<action>").removesuffix("</action>")) for s in states for x in s.samples[1:]]
    assert draws and all(not Admissible(steps[sid].admissible_actions).is_template(a) for sid, a in draws if a)
    assert {p.policy for p in read_jsonl(tmp_path / "a.jsonl", Pair)} == {gen.name}


def test_the_random_policy_refuses_tool_lists_and_names_from_data(tmp_path):
    """A tool list has no concrete call to draw (only templates, which are never admissible): the random policy
    says so and points to ``pipeline.pairs_policy=from_data``, instead of pairing the expert with a template."""
    from nemo_act.generation import make_pairs_generator
    from nemo_act.steps.experts import collect_experts
    from nemo_act.steps.pairs import collect_pairs

    cfg = load_config(overrides=["benchmark=traces", f"benchmark.path={EXAMPLE}"])
    experts = tmp_path / "experts.jsonl"
    collect_experts(cfg, "train", experts)
    with pytest.raises(ValueError, match=r"random policy has no concrete action.*pipeline.pairs_policy=from_data"):
        collect_pairs(experts, make_pairs_generator("random", cfg, experts), cfg, tmp_path / "p.jsonl", progress=False)


def test_the_support_desk_example_is_what_its_script_makes():
    """The larger shipped example (tools/examples/make_support_desk.py) is the script's bytes, and has what real
    service logs have: a long policy system prompt, greetings before the user, trials of one task grouped by
    ``metadata.task`` (never on both sides of the split), schemas with required arguments and enums that every
    recorded call satisfies."""
    sys.path.insert(0, str(REPO / "tools" / "examples"))
    try:
        import make_support_desk
    finally:
        sys.path.pop(0)
    assert make_support_desk.main(["--check"]) == 0
    path = REPO / "nemo_act" / "benchmarks" / "examples" / "support_desk.jsonl"
    groups: dict[str, set[str]] = {}
    trajs = read_traces(path, 0.2, split_by="task", groups=groups)
    assert len(trajs) >= 50 and not groups["train"] & groups["dev"] and len(groups["dev"]) >= 3
    assert all(len(t.context) > 2500 for t in trajs)
    assert sum(t.steps[0].observation.startswith("Assistant: ") for t in trajs) > len(trajs) / 3
    assert all(s.action_admissible for t in trajs for s in t.steps)
    entries = trajs[0].steps[0].admissible_actions
    assert any('"reason": "change_of_plan"|"airline_cancelled"' in e for e in entries)
    assert len({t.steps[-1].action for t in trajs}) > 20  # replies differ across members and trials


@pytest.mark.heavy
def test_rows_over_the_model_context_are_skipped_and_named(tiny_model_dir, tmp_path, capsys):
    """The last guard before a trainer: with the stage's tokenizer, an SFT row longer than
    ``model.max_context_tokens`` (prompt + answer) and a GRPO row whose prompt leaves less than
    ``max_completion_length`` are skipped and named by their trace's file:line; every row kept fits."""
    from transformers import AutoTokenizer

    from nemo_act import stage_data
    from nemo_act.generation import make_pairs_generator
    from nemo_act.steps.experts import collect_experts
    from nemo_act.steps.pairs import collect_pairs

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)

    def tokens(messages: list[dict[str, str]], generation: bool) -> int:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        return len(tok(text, add_special_tokens=False)["input_ids"])

    base = load_config(overrides=["benchmark=traces", f"benchmark.path={EXAMPLE}", "train=demo"])
    experts, pairs = tmp_path / "experts.jsonl", tmp_path / "pairs.jsonl"
    collect_experts(base, "train", experts)
    collect_pairs(experts, make_pairs_generator("from_data", base, experts), base, pairs, progress=False)
    every = stage_data.rows_for("il", experts, base, str(tiny_model_dir))
    lengths = sorted(tokens(r["prompt"] + r["completion"], False) for r in every)
    limit = lengths[len(lengths) // 2]
    cfg = base.model_copy(update={"model": base.model.model_copy(update={"max_context_tokens": limit})})
    capsys.readouterr()
    kept = stage_data.rows_for("il", experts, cfg, str(tiny_model_dir))
    assert 0 < len(kept) < len(every) and all(tokens(r["prompt"] + r["completion"], False) <= limit for r in kept)
    err = capsys.readouterr().err
    assert f"skipped {len(every) - len(kept)} of {len(every)} rows over model.max_context_tokens ({limit})" in err
    assert f"{EXAMPLE}:" in err and "(step " in err
    reserve = cfg.train.act.max_completion_length
    act = stage_data.rows_for("act", pairs, cfg, str(tiny_model_dir))
    assert act and all(tokens(r["prompt"], True) + reserve <= limit for r in act)
    assert len(act) < len(stage_data.rows_for("act", pairs, base, str(tiny_model_dir)))


@pytest.mark.heavy
def test_a_10_mb_argument_in_train_and_dev_is_a_counted_skip_not_a_crash(tiny_model_dir, tmp_path):
    """`nemo-act run conf/pipeline/act_il.yaml` on part of the support desk example (grouped split, from_data
    alternatives) plus one trace with a 10 MB argument in train and one in dev: the run finishes, each is named
    by file:line and counted where it is skipped (both pairs files, the IL rows), the pair summary and held-out
    selection before and after ACT are printed, and the whole run's peak memory stays under 2 GB."""
    example = REPO / "nemo_act" / "benchmarks" / "examples" / "support_desk.jsonl"
    lines = example.read_text().splitlines()
    splits = [t.split for t in read_traces(example, 0.2, split_by="task")]
    train = [x for x, s in zip(lines, splits, strict=True) if s == "train"][:3]
    dev = [x for x, s in zip(lines, splits, strict=True) if s == "dev"][:2]
    huge = []
    for split, src in (("train", train[0]), ("dev", dev[0])):
        record = json.loads(src)
        record.update(id=f"huge-{split}", split=split, metadata={"task": f"huge-{split}"})
        call = next(m for m in record["messages"] if m.get("tool_calls"))["tool_calls"][0]["function"]
        call["arguments"] = json.dumps({"email": "x" * 10 * 2**20})  # find_user's argument
        huge.append(json.dumps(record))
    f = tmp_path / "desk.jsonl"
    f.write_text("\n".join([*train, *dev, *huge]) + "\n")  # huge lines: 6 (train) and 7 (dev)
    run = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "nemo_act.cli", "run", str(REPO / "conf" / "pipeline" / "act_il.yaml"),
        "benchmark=traces", f"benchmark.path={f}", "benchmark.split_by=task", "pipeline.pairs_policy=from_data",
        f"model.name_or_path={tiny_model_dir}", "train=demo", "train.act.max_steps=1", "train.act.batch_size=4",
        "train.act.num_generations=2", "train.il.max_steps=1", "train.il.batch_size=4", f"run_dir={run}",
        "eval.sampling.max_new_tokens=24",
    ]  # fmt: skip
    peak = (  # the largest RSS of the run's processes (RUSAGE_CHILDREN of a parent that ran nothing else)
        "import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
        "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", peak, *cmd], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=900)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert f"{f}:6 (step 1): expert action of 10,485,7" in out and f"{f}:7 (step 1): expert action of" in out
    assert f"{f}:6 (step 1): more than" in out  # the IL row of that state, skipped before any tokenizer saw it
    from nemo_act.data.manifest import read_manifest

    for name in ("pairs.jsonl", "heldout_pairs.jsonl"):
        assert read_manifest(run / "data" / name)["counts"]["states_too_long"] == 1
    assert "ACT pairs" in out and "states too long" in out and "samples too long" in out
    assert "held-out selection, init:" in out and "held-out selection, 01_act:" in out
    peak_kb = int(out.split("PEAK_KB ")[1].split()[0])
    assert peak_kb < 2 * 2**20, f"peak {peak_kb / 2**20:.2f} GB"


STRICT = {  # a tool schema as the support desk's are: closed to other arguments, a case-sensitive enum
    "name": "cancel_reservation",
    "parameters": {
        "type": "object",
        "properties": {"reservation_id": {"type": "string"}, "cabin": {"type": "string", "enum": ["economy"]}},
        "required": ["reservation_id"],
        "additionalProperties": False,
    },
}


@pytest.mark.parametrize(
    ("action", "admissible", "accuracy"),
    [
        ('cancel_reservation({"reservation_id": "M05KNL", "cabin": "economy"})', True, 1.0),
        ('cancel_reservation({"cabin":"economy",   "reservation_id":"M05KNL"})', True, 1.0),  # order, spacing: free
        ('cancel_reservation({"reservation_id": "m05knl", "cabin": "economy"})', True, 0.0),  # another id (valid)
        ('cancel_reservation({"reservation_id": "M05KNL", "cabin": "ECONOMY"})', False, 0.0),  # not the enum's value
        ('cancel_reservation({"reservation_id": "M05KNL", "cabin": "economy", "drop_table": true})', False, 0.0),
        ('CANCEL_RESERVATION({"reservation_id": "M05KNL", "cabin": "economy"})', False, 0.0),  # no such tool
        ('cancel_reservation(<arguments: {"cabin"?: "economy", "reservation_id": string}>)', False, 0.0),  # template
        ("<a text reply to the user>", False, 0.0),  # the text-reply template
        ('calculate(<arguments: {"expression": string}>)', False, 0.0),  # another tool's template
    ],
)
def test_tool_calls_compare_exactly_and_templates_are_never_admissible(action, admissible, accuracy):
    """Admissible = a call this state's tools accept: string values exact (an enum's case too), no argument the
    schema closes out, never a template; accuracy compares the parsed calls (key order and spacing free, values
    exact: a case-changed id is another, valid, call)."""
    from nemo_act.config.schema import RewardValues
    from nemo_act.rewards import action_reward

    entries = [tool_template(STRICT), REPLY_ENTRY]
    assert entries[0] == 'cancel_reservation(<arguments: {"cabin"?: "economy", "reservation_id": string}>)'
    assert in_actions(action, entries) is admissible
    expert = 'cancel_reservation({"cabin": "economy", "reservation_id": "M05KNL"})'
    reward = action_reward(f"<action>{action}</action>", expert, entries, RewardValues(correct=1, admissible=0.1,
                           malformed=-1), True)  # fmt: skip
    assert (reward.accuracy, reward.admissible) == (accuracy, 0.1 if admissible and not accuracy else 0.0)


def test_extra_arguments_follow_json_schema_where_the_tool_is_silent():
    """A schema without ``additionalProperties`` allows other arguments (JSON Schema's default): its entry says
    so with ``...``; ``"additionalProperties": false`` closes it."""
    open_tool = {"name": "lookup", "parameters": {"properties": {"q": {"type": "string"}}, "required": ["q"]}}
    closed = {"name": "lookup", "parameters": {**open_tool["parameters"], "additionalProperties": False}}
    extra = 'lookup({"q": "oslo", "limit": 3})'
    assert tool_template(open_tool) == 'lookup(<arguments: {"q": string, ...}>)' and in_actions(
        extra, [tool_template(open_tool)]
    )
    assert tool_template(closed) == 'lookup(<arguments: {"q": string}>)' and not in_actions(
        extra, [tool_template(closed)]
    )
    assert in_actions('lookup({"q": "oslo"})', [tool_template(closed)])


def test_refusal_turns_are_text_actions_and_counted(tmp_path):
    """OpenAI's refusal turn (content null, a ``refusal`` text) is the agent declining in text: a text action,
    counted in the experts manifest, instead of a 'neither text nor tool calls' error."""
    from nemo_act.steps.experts import collect_experts

    refusal = [*_trace()[:2], {"role": "assistant", "content": None, "refusal": "I can't help with that."}]
    f = tmp_path / "log.jsonl"
    f.write_text(_line(refusal, id="r", split="train", tools=[WEATHER]) + _line(_trace(), id="ok", split="train"))
    first, _ = read_traces(f, 0.2)
    assert first.steps[0].action == "I can't help with that." and first.steps[0].action_admissible
    cfg = load_config(overrides=["benchmark=traces", f"benchmark.path={f}"])
    counts = collect_experts(cfg, "train", tmp_path / "experts.jsonl").counts
    assert counts["refusal_turns"] == 1 and counts["steps_admissible"] == 1  # the untooled trace lists nothing


@pytest.mark.heavy
def test_experts_on_the_support_desk_say_what_is_admissible_and_that_no_group_was_found(tmp_path):
    """`nemo-act experts` on the support desk example (no 'group' field, ids ending in -t0, -t1): the real count of
    actions admissible when taken, and a split line that says no group was found, how many ids look like one
    task's trials and how many of those tasks straddle the split, naming benchmark.split_by."""
    path = REPO / "nemo_act" / "benchmarks" / "examples" / "support_desk.jsonl"
    cmd = [sys.executable, "-m", "nemo_act.cli", "experts", "--benchmark", "traces", "--split", "train", "--out",
           str(tmp_path / "e.jsonl"), f"benchmark.path={path}"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    steps = sum(len(t.steps) for t in read_traces(path, 0.2) if t.split == "train")
    assert f"actions admissible when taken: {steps}" in out  # every recorded call validates against its tool
    assert "groups: none found" in out and "look like trials" in out and "benchmark.split_by" in out
    assert "(0 in several splits)" not in out


def _airline(tmp_path, tasks: int = 12, trials: int = 3):
    """Trials of tasks whose task is only in the id (``airline-task12-trial3``), as exported logs are."""
    f = tmp_path / "airline.jsonl"
    f.write_text("".join(_line(_trace(), id=f"airline-task{task}-trial{trial}")
                         for task in range(tasks) for trial in range(trials)))  # fmt: skip
    return f


@pytest.mark.parametrize("rule", ["id:trial", r"id:^(airline-task\d+)", r"id:airline-task\d+"])
def test_a_task_that_lives_only_in_its_ids_splits_with_one_setting(tmp_path, rule):
    """Issue 46: the trial detector found the leak but `split_by` took only keys, so a file whose task is only in the
    id had to be rewritten. An ``id:`` rule groups by the id: no task has trials on both sides."""
    f = _airline(tmp_path)
    plain = read_traces(f, 0.3)
    assert any(len({t.split for t in plain if t.task_id.startswith(f"airline-task{n}-")}) > 1 for n in range(12)), (
        "without a rule the hash split must leak, or the test proves nothing"
    )
    groups: dict[str, set[str]] = {}
    trajs = read_traces(f, 0.3, split_by=rule, groups=groups)
    for n in range(12):
        assert len({t.split for t in trajs if t.task_id.startswith(f"airline-task{n}-")}) == 1, n
    assert sum(len(g) for g in groups.values()) == 12 and {"train", "dev"} <= set(groups)
    cfg = load_config(overrides=["benchmark=traces", f"benchmark.path={f}", f"benchmark.split_by={rule}"])
    assert cfg.benchmark.split_by == rule


def test_an_id_rule_that_finds_no_group_or_is_no_regex_is_named(tmp_path):
    f = _airline(tmp_path, tasks=1, trials=1)
    with pytest.raises(RecordError, match=r"airline.jsonl:1: field 'id': benchmark.split_by=id:\^hotel finds no group"):
        read_traces(f, 0.3, split_by="id:^hotel")
    from nemo_act.config import ConfigError

    with pytest.raises(ConfigError, match=r"split_by.*'id:\(\(': not a regular expression"):
        load_config(overrides=["benchmark=traces", f"benchmark.path={f}", "benchmark.split_by=id:(("])


@pytest.mark.heavy
def test_run_and_pairs_print_the_leak_and_its_fix_once(tmp_path):
    """Issue 46: the leak warning was only in the manifest when `nemo-act run` built the experts. `run` (train and
    held-out experts read the same file: said once) and `pairs` print it, naming the setting; with it, no warning."""
    f = _airline(tmp_path)
    base = [sys.executable, "-m", "nemo_act.cli"]
    args = ["benchmark=traces", f"benchmark.path={f}", "benchmark.heldout_share=0.3"]
    act_il = str(REPO / "conf" / "pipeline" / "act_il.yaml")
    run = subprocess.run([*base, "run", act_il, "--only", "experts", f"run_dir={tmp_path / 'run'}", *args],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    said = " ".join(run.stdout.split())
    assert said.count("tasks have trials in several splits") == 1 and "set benchmark.split_by=id:trial" in said
    experts = str(tmp_path / "run" / "data" / "experts.jsonl")
    pairs_cmd = [*base, "pairs", "--experts", experts, "--policy", "random", "--out", str(tmp_path / "p.jsonl"), *args]
    pairs = subprocess.run([*pairs_cmd, "pairs.min_state_share=0"], capture_output=True, text=True, timeout=300)
    assert pairs.returncode == 0, pairs.stderr[-2000:]
    assert "warning: " in pairs.stdout and "set benchmark.split_by=id:trial" in pairs.stdout
    fixed = subprocess.run([*base, "run", str(REPO / "conf" / "pipeline" / "act_il.yaml"), "--only", "experts",
                            f"run_dir={tmp_path / 'fixed'}", *args, "benchmark.split_by=id:trial"],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert fixed.returncode == 0 and "warning" not in fixed.stdout, fixed.stdout[-2000:]


def test_the_traces_docs_quote_the_prompt_budgets_conf_sets():
    """Issue 46: docs/benchmarks.md gave max_action_chars as 4,000 and said it decided which states are skipped,
    where conf set 1,000 and the skip used max_candidate_chars. Every budget the traces section quotes is conf's."""
    text = " ".join((REPO / "docs" / "benchmarks.md").read_text().split())
    section = text[text.index("## Your own traces") : text.index("## TextWorld-Express")]
    prompt = load_config(overrides=["benchmark=traces"]).prompt
    quoted = re.findall(r"`(?:prompt\.)?(max_\w+_chars)` \(?([\d,]+)", section)
    assert {name for name, _ in quoted} >= {"max_task_chars", "max_context_chars", "max_observation_chars",
                                            "max_action_chars", "max_candidate_chars"}, quoted  # fmt: skip
    for name, figure in quoted:
        assert int(figure.replace(",", "")) == getattr(prompt, name), name
    assert "longer than `prompt.max_candidate_chars` (4,000) is skipped" in section


def _score(action: str, expert: str, entries: list[str]):
    from nemo_act.config.schema import RewardValues
    from nemo_act.rewards import action_reward

    values = RewardValues(correct=1, admissible=0.1, malformed=-1)
    return action_reward(f"<action>{action}</action>", expert, entries, values, True)


@pytest.mark.parametrize("rid", ["aarav_garcia_1177", "M05KNL"])
@pytest.mark.parametrize("around", ["{}", "{}.", " {} ", "{};", "`{}`", '"{}"!', "{}\n"])
def test_a_call_scores_the_same_whatever_stands_around_it_and_whatever_the_ids_case(rid, around):
    """Issue 46: ``call({...}).`` scored accuracy 1 when the id was lower-case and 0 (admissible 0.1) with capitals:
    the trailing period sent it down the text path, which lower-cases. One rule now strips what stands around any
    answer, then a call compares by canonical JSON, case included."""
    entries = [tool_template(STRICT), REPLY_ENTRY]
    expert = f'cancel_reservation({{"reservation_id": "{rid}"}})'
    reward = _score(around.format(f'cancel_reservation({{"reservation_id": "{rid}"}})'), expert, entries)
    assert (reward.accuracy, reward.admissible) == (1.0, 0.0)
    other = _score(around.format(f'cancel_reservation({{"reservation_id": "{rid.swapcase()}"}})'), expert, entries)
    assert (other.accuracy, other.admissible) == (0.0, 0.1)  # another id: a valid call, and wrong, in both cases


@pytest.mark.parametrize(
    "spaced",
    [
        'cancel_reservation ({"reservation_id": "M05KNL"})',
        'cancel_reservation( {"reservation_id": "M05KNL"})',
        'cancel_reservation({"reservation_id": "M05KNL"} )',
        'cancel_reservation ( { "reservation_id" : "M05KNL" } )',
        'cancel_reservation({"reservation_id": "M05KNL"}) ;  cancel_reservation( {"reservation_id": "M05KNL"} )',
    ],
)
def test_spacing_outside_strings_is_free_in_every_position(spaced):
    """Issue 46: the docs promise free spacing outside strings, but ``name( {...})`` and ``name({...} )`` did not
    parse and ``name ({...})`` was admitted as a text reply."""
    from nemo_act.rewards.tool_calls import canonical_calls

    single = 'cancel_reservation({"reservation_id": "M05KNL"})'
    assert canonical_calls(spaced) in (single, f"{single}; {single}")
    assert in_actions(spaced, [tool_template(STRICT), REPLY_ENTRY])
    if ";" not in spaced:
        assert _score(spaced, single, [tool_template(STRICT), REPLY_ENTRY]).accuracy == 1.0


def test_text_with_a_parenthesis_is_still_a_text_reply():
    """Free spacing must not make prose call-shaped: only ``name(`` or ``name ({`` starts a call."""
    entries = [tool_template(STRICT), REPLY_ENTRY]
    assert in_actions("Yes (see your booking above).", entries)
    assert not in_actions('cancel_reservation ({"reservation_id": 5})', entries)  # call-shaped, a mistyped argument
