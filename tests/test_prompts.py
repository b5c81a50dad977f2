import re
from pathlib import Path

import pytest

from nemo_act.data import HistoryItem, State, Trajectory
from nemo_act.prompts import (
    apply_chat_template,
    generation_prompt,
    select_admissible,
    selection_prompt,
    trajectory_state,
)

ACT_METHOD_PROMPT = """Task: {task_description}
Below are the most recent {k} observations and actions:
{history}
You are now at step {current_step} and your current observation is: {o_t}
Your admissible actions of the current situation are: {admissible_actions}
Candidate Actions for the NEXT step:
Action 1: {a_sigma(1)}
Action 2: {a_sigma(2)}
Which action is better as the NEXT step? Think about why, then output the chosen action inside <action>...</action> tags."""  # noqa: E501


def _state(**kw) -> State:
    base = dict(
        task_description="Your task is to boil water.",
        history=[HistoryItem(observation="You are in the hallway.", action="go to kitchen")],
        step=2,
        observation="You are in the kitchen. You see a stove.",
        admissible_actions=["activate stove", "look around"],
    )
    return State(**(base | kw))


def _fill(template: str, state: State, history: str, admissible: str, a1: str, a2: str) -> str:
    return (
        template.replace("{task_description}", state.task_description)
        .replace("{k}", str(len(state.history)))
        .replace("{history}", history)
        .replace("{current_step}", str(state.step))
        .replace("{o_t}", state.observation)
        .replace("{admissible_actions}", admissible)
        .replace("{a_sigma(1)}", a1)
        .replace("{a_sigma(2)}", a2)
    )


def test_selection_prompt_is_the_paper_prompt_word_for_word(cfg):
    state = _state()
    bare = cfg.prompt.model_copy(update={"preamble": False})
    text = selection_prompt(state, ["look around", "activate stove"], "scienceworld", bare)
    expected = _fill(
        ACT_METHOD_PROMPT,
        state,
        "[Step 1] Observation: You are in the hallway. Action: go to kitchen",
        "['activate stove', 'look around']",
        "look around",
        "activate stove",
    )
    assert text == expected


@pytest.mark.heavy
def test_selection_prompt_matches_act_method_md(cfg, benchmarks_dir):
    method = benchmarks_dir.parent / "ACT-METHOD.md"
    if not method.exists():
        pytest.skip(f"{method} not present")
    block = re.search(r"## ACT prompt.*?```\n(.*?)```", method.read_text(), re.S).group(1).rstrip("\n")
    assert block == ACT_METHOD_PROMPT


def test_per_benchmark_variants_only_add_a_preamble(cfg):
    state = _state()
    bare = cfg.prompt.model_copy(update={"preamble": False})
    core = selection_prompt(state, ["a", "b"], "alfworld", bare)
    for bench, words in [("alfworld", "ALFRED"), ("webshop", "WebShop"), ("scienceworld", "ScienceWorld")]:
        text = selection_prompt(state, ["a", "b"], bench, cfg.prompt)
        assert text.endswith(core) and words in text.split("\n")[0]


def test_no_reasoning_control_drops_only_the_think_instruction(cfg):
    state = _state()
    on = selection_prompt(state, ["a", "b"], "alfworld", cfg.prompt)
    off = selection_prompt(state, ["a", "b"], "alfworld", cfg.prompt.model_copy(update={"act_reasoning": False}))
    assert "Think about why" in on and "Think" not in off
    assert on.rsplit("\n", 1)[0] == off.rsplit("\n", 1)[0]


def test_cot_and_no_cot_differ_only_by_the_paper_instruction(cfg):
    state = _state()
    cot = generation_prompt(state, "scienceworld", cfg.prompt)
    no_cot = generation_prompt(state, "scienceworld", cfg.prompt.model_copy(update={"cot": False}))
    instruction = "Think step by step about which action best advances the task, then give your choice. "
    assert instruction in cot and cot.replace(instruction, "") == no_cot
    assert "<action>...</action>" in no_cot and "Candidate" not in cot


def test_first_step_has_empty_history(cfg):
    text = generation_prompt(_state(history=[], step=1), "alfworld", cfg.prompt)
    assert "most recent 0 observations" in text and "(none)" in text and "at step 1 " in text


def test_observation_cut_is_marked(cfg):
    long = "x" * (cfg.prompt.max_observation_chars + 50)
    text = generation_prompt(_state(observation=long), "alfworld", cfg.prompt)
    assert "x" * (cfg.prompt.max_observation_chars - 3) + "..." in text and long not in text


def test_admissible_subset_is_bounded_and_keeps_required_actions():
    admissible = [f"move item{i} to box{j}" for i in range(40) for j in range(40)]  # 1,600 actions
    must = ["move item39 to box0", "move item0 to box39"]
    shown = select_admissible(admissible, "You see item3 and box5.", 30, must_include=must, key="s1")
    assert len(shown) == 30 and set(must) <= set(shown) and shown == sorted(shown)
    assert "move item3 to box5" in shown  # the action naming what the observation names ranks first
    assert shown == select_admissible(admissible, "You see item3 and box5.", 30, must_include=must, key="s1")
    # without required actions the list does not depend on the expert
    assert len(select_admissible(admissible, "You see item3 and box5.", 30, key="s1")) == 30


def test_short_lists_are_shown_whole_in_env_order():
    assert select_admissible(["b", "a"], "", 10, must_include=["a"]) == ["b", "a"]


def test_trajectory_state_window_and_expert_alias():
    traj = Trajectory.model_validate(
        {
            "trajectory_id": "t/1",
            "benchmark": "scienceworld",
            "task_id": "t",
            "split": "test",
            "task_description": "Measure it.",
            "steps": [
                {
                    "observation": f"obs{i}",
                    "action": f"act{i} in inventory",
                    "admissible_actions": [f"act{i}"],
                    "action_admissible": True,
                    "admissible_alias": f"act{i}",
                }
                for i in range(5)
            ],
            "score": 100,
            "success": True,
            "source": "test",
        }
    )
    s = trajectory_state(traj, 4, history_k=2, max_shown=10)
    assert s.step == 5 and s.observation == "obs4"
    assert [(h.observation, h.action) for h in s.history] == [("obs2", "act2"), ("obs3", "act3")]
    assert s.admissible_actions == ["act4"]


@pytest.mark.heavy
def test_chat_template_and_thinking_switch(tiny_model_dir, cfg):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    msgs = [{"role": "user", "content": "hello"}]
    off = apply_chat_template(tok, msgs, enable_thinking=False)
    default = apply_chat_template(tok, msgs, enable_thinking=None)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert default.endswith("<|im_start|>assistant\n")


@pytest.mark.heavy
def test_scienceworld_prompts_fit_the_context(sw_experts, cfg):
    """Every state of real experts renders within the tiny model's context, with a BPE trained on them."""
    from nemo_act.data import read_jsonl
    from nemo_act.prompts import as_messages, iter_states
    from nemo_act.tiny_model import build_tokenizer

    tok = build_tokenizer(cfg.model.tiny, corpus=[sw_experts])
    trajs = list(read_jsonl(sw_experts, Trajectory))
    longest = 0
    for traj, i in iter_states(trajs):
        state = trajectory_state(traj, i, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
        assert len(state.admissible_actions) <= cfg.benchmark.max_admissible_shown
        text = apply_chat_template(tok, as_messages(generation_prompt(state, "scienceworld", cfg.prompt)), False)
        longest = max(longest, len(tok(text)["input_ids"]))
    assert 0 < longest < cfg.model.max_context_tokens - cfg.eval.sampling.max_new_tokens


def test_templates_live_in_files():
    folder = Path(__file__).resolve().parents[1] / "nemo_act" / "prompts" / "templates"
    names = {p.name for p in folder.glob("*.txt")}
    assert {"act_selection.txt", "action_generation.txt", "act_instruction.txt"} <= names


def test_every_preamble_is_one_line_ending_in_a_newline():
    """A preamble is put before the prompt's first line: without its newline the two lines run together."""
    from importlib import resources

    folder = resources.files("nemo_act.prompts") / "templates"
    preambles = [p for p in folder.iterdir() if p.name.startswith("preamble.")]
    assert len(preambles) >= 4
    for p in preambles:
        text = p.read_text(encoding="utf-8")
        assert text.endswith("\n") and text.count("\n") == 1, p.name
