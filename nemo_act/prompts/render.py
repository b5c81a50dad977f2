"""Render states into the ACT selection prompt and the action-generation prompt, as chat messages.

Templates are the ``*.txt`` files in ``nemo_act/prompts/templates``; this module only fills them.

* ACT selection (``act_selection.txt``): the paper's prompt, word for word, with the final
  instruction taken from ``act_instruction.txt`` (or ``act_instruction_no_reasoning.txt`` for the
  no-reasoning control).
* Action generation (``action_generation.txt``): the prompt of IL, RL and evaluation; CoT and no-CoT
  differ only by the paper's instruction "Think step by step ...".
* Early Experience (``ee_reflection.txt``, ``ee_outcome_item.txt``, ``wm_prediction.txt``): ours, for the
  reflection baseline and its world-modelling variant (docs/method.md "Reflection baselines").
* Lengths: every part has a budget in characters (``prompt.max_*_chars``): the task, the standing
  instructions (``context_item.txt``, a trace's system prompt), each observation and each past action keep their
  first characters, marked ``...``; the candidates and the expert's action are never cut (they are what the model
  must answer): a state whose action is over ``prompt.max_candidate_chars`` is skipped where states are built
  (:mod:`nemo_act.prompts.length`), and a row over ``model.max_context_tokens`` is skipped before training.
* Per-benchmark variants: ``preamble.<benchmark>.txt`` is put before either prompt when
  ``prompt.preamble`` is on (the paper's per-benchmark figures are not in our copy; the preambles
  are ours, in verl-agent's wording).
* Next to the benchmark's YAML first: ``<config folder>/benchmark/<template>.<benchmark>.txt`` in the config
  search path (:func:`nemo_act.common.paths.conf_roots`) replaces the packaged template for that benchmark
  (``preamble.mybench.txt`` beside ``mybench.yaml``; ``action_generation.mybench.txt`` for a prompt of its own).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from nemo_act.common.paths import find_conf
from nemo_act.config.schema import PromptConfig
from nemo_act.data.records import State
from nemo_act.prompts.length import cut, fit_state

Message = dict[str, str]


def template(name: str, benchmark: str | None = None) -> str:
    """The text of template ``name`` for ``benchmark``: beside the benchmark's YAML first, else the packaged one.

    ``preamble`` is per benchmark and '' where there is none.
    """
    return _template(name, benchmark, os.environ.get("NEMO_ACT_CONF", ""))


@cache
def _template(name: str, benchmark: str | None, search: str) -> str:
    if benchmark:
        own = find_conf(f"benchmark/{name}.{benchmark}.txt")
        if own is not None:
            return own.read_text(encoding="utf-8")
    packaged = f"{name}.{benchmark}" if name == "preamble" else name
    res = resources.files("nemo_act.prompts") / "templates" / f"{packaged}.txt"
    if not res.is_file():
        if name == "preamble":
            return ""
        raise FileNotFoundError(f"prompt template {name}.txt not found in nemo_act/prompts/templates")
    return res.read_text(encoding="utf-8")


def format_admissible(actions: Sequence[str]) -> str:
    """Quoted list, as verl-agent shows admissible actions: ``['go to kitchen', 'look around']``."""
    return "[" + ", ".join(f"'{a}'" for a in actions) + "]"


def _state_fields(state: State, benchmark: str, cfg: PromptConfig) -> dict[str, Any]:
    state = fit_state(state, cfg)  # every part cut to its budget: the one rule, shared with what a pair stores
    history = "\n".join(
        template("history_item", benchmark).format(
            step=state.step - len(state.history) + i, observation=h.observation, action=h.action
        )
        for i, h in enumerate(state.history)
    )
    return {
        "context": template("context_item", benchmark).format(context=state.context) if state.context else "",
        "task_description": state.task_description,
        "k": len(state.history),
        "history": history or "(none)",
        "current_step": state.step,
        "observation": state.observation,
        "admissible_actions": format_admissible(state.admissible_actions),
    }


def _preamble(benchmark: str, cfg: PromptConfig) -> str:
    return template("preamble", benchmark) if cfg.preamble else ""


def _render(name: str, state: State, benchmark: str, cfg: PromptConfig, **fields: Any) -> str:
    """The preamble, then template ``name`` filled with the state's fields and ``fields``."""
    return _preamble(benchmark, cfg) + template(name, benchmark).format(
        **_state_fields(state, benchmark, cfg), **fields
    )


def _outcome_items(outcomes: Sequence[tuple[str, str]], benchmark: str, cfg: PromptConfig) -> str:
    """(action, the observation after it) pairs as ``ee_outcome_item`` lines, each observation cut."""
    item = template("ee_outcome_item", benchmark)
    return "\n".join(item.format(action=a, observation=cut(o, cfg.max_observation_chars)) for a, o in outcomes)


def selection_prompt(state: State, candidates: Sequence[str], benchmark: str, cfg: PromptConfig) -> str:
    """Render the ACT selection prompt.

    Two candidates use the paper's prompt (``act_selection.txt``); more (K-way selection, ours) list
    "Action 1" .. "Action N" in the same layout and ask for the best (``act_selection_multi.txt``).

    Args:
        state: The decision state (its admissible list is shown as is).
        candidates: The candidate actions in the order shown (2, or N for K-way selection).
        benchmark: Benchmark name (chooses the preamble).
        cfg: Prompt settings (reasoning instruction on/off, preamble, cuts).

    Returns:
        The user message text.
    """
    if len(candidates) < 2:
        raise ValueError(f"ACT selection needs at least 2 candidates, got {len(candidates)}")
    multi = "_multi" if len(candidates) > 2 else ""
    instruction = template(
        f"act_instruction{multi}" if cfg.act_reasoning else f"act_instruction{multi}_no_reasoning", benchmark
    )
    if multi:
        lines = "\n".join(f"Action {i}: {c}" for i, c in enumerate(candidates, start=1))
        return _render("act_selection_multi", state, benchmark, cfg, candidate_lines=lines, instruction=instruction)
    return _render(
        "act_selection", state, benchmark, cfg, action_1=candidates[0], action_2=candidates[1], instruction=instruction
    )


def generation_prompt(state: State, benchmark: str, cfg: PromptConfig) -> str:
    """Render the action-generation prompt (IL, RL, evaluation, alternative sampling).

    Args:
        state: The decision state.
        benchmark: Benchmark name (chooses the preamble).
        cfg: Prompt settings (``cot`` picks the instruction).

    Returns:
        The user message text.
    """
    instruction = template("action_instruction_cot" if cfg.cot else "action_instruction_no_cot", benchmark)
    return _render("action_generation", state, benchmark, cfg, instruction=instruction)


def reflection_prompt(
    state: State, outcomes: Sequence[tuple[str, str]], action: str, benchmark: str, cfg: PromptConfig
) -> str:
    """Render the Early Experience reflection prompt (``ee_reflection.txt``, ours).

    Args:
        state: The decision state.
        outcomes: (action, the observation the env showed right after it), in the order shown; the
            caller shuffles them so the expert's place says nothing.
        action: The action the reflection must argue for (the expert's).
        benchmark: Benchmark name (chooses the preamble).
        cfg: Prompt settings (observation cut).

    Returns:
        The user message text.
    """
    return _render(
        "ee_reflection", state, benchmark, cfg, outcomes=_outcome_items(outcomes, benchmark, cfg), action=action
    )


def critique_prompt(
    state: State, action: str, steps: Sequence[tuple[str, str]], score: float, benchmark: str, cfg: PromptConfig
) -> str:
    """Render SAND's critique prompt (``sand_critique.txt``, ours): judge one candidate from what followed it.

    Args:
        state: The decision state.
        action: The candidate.
        steps: (action, the observation after it) from the candidate on, as many as the prompt shows.
        score: The best score the episode reached (0-100).
        benchmark: Benchmark name (chooses the preamble).
        cfg: Prompt settings (observation cut).
    """
    items = _outcome_items(steps, benchmark, cfg)
    return _render("sand_critique", state, benchmark, cfg, action=action, steps=items, score=score)


def deliberation_prompt(
    state: State, critiques: Sequence[tuple[str, str]], action: str, benchmark: str, cfg: PromptConfig
) -> str:
    """Render SAND's deliberation prompt (``sand_deliberation.txt``, ours): compare the judged candidates.

    Args:
        state: The decision state.
        critiques: (action, its critique), in the order shown (the caller shuffles them).
        action: The action the deliberation must arrive at (the expert's).
        benchmark: Benchmark name (chooses the preamble).
        cfg: Prompt settings.
    """
    items = "\n".join(template("sand_critique_item", benchmark).format(action=a, critique=c) for a, c in critiques)
    return _render("sand_deliberation", state, benchmark, cfg, critiques=items, action=action)


def rationale_prompt(state: State, candidates: Sequence[str], target: str, benchmark: str, cfg: PromptConfig) -> str:
    """Render the intervention analysis' rationale-writing prompt (``intervention_rationale.txt``, ours).

    Args:
        state: The decision state of a pair.
        candidates: Its two candidates, in the order the selection prompt shows them.
        target: The action the rationale argues for (the alternative, never the expert's).
        benchmark: Benchmark name (chooses the preamble).
        cfg: Prompt settings.
    """
    return _render(
        "intervention_rationale", state, benchmark, cfg, action_1=candidates[0], action_2=candidates[1], target=target
    )


def world_model_prompt(state: State, action: str, benchmark: str, cfg: PromptConfig) -> str:
    """Render the implicit world-modelling prompt (``wm_prediction.txt``, ours): predict an action's outcome."""
    return _render("wm_prediction", state, benchmark, cfg, action=action)


def as_messages(user_text: str) -> list[Message]:
    """Wrap a prompt as a one-turn chat."""
    return [{"role": "user", "content": user_text}]


def apply_chat_template(tokenizer: Any, messages: list[Message], enable_thinking: bool | None) -> str:
    """Render chat messages with the tokenizer's template, ready for generation.

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template.
        messages: The chat.
        enable_thinking: Passed to the template (Qwen3); None leaves the template's default.

    Returns:
        The prompt text, ending with the assistant generation header.
    """
    kwargs: dict[str, Any] = {}
    if enable_thinking is not None:
        kwargs["enable_thinking"] = enable_thinking
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
