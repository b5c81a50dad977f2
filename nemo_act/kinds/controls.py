"""The controls on ACT's pairs and their row builders.

SFT on the selection prompt -> the expert's action, no rationale (``sft_choice``), and DPO with the expert's action
chosen over the alternative (``dpo``).
"""

from __future__ import annotations

from collections.abc import Iterable

from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.records import Pair
from nemo_act.generation.simple import wrap_action
from nemo_act.prompts.length import SOURCE_KEY
from nemo_act.prompts.render import as_messages, generation_prompt, selection_prompt
from nemo_act.stage_data import Row, assistant, sft_row, sourced
from nemo_act.stage_kinds import StageKind, register


@sourced
def sft_choice_rows(pairs: Iterable[Pair], cfg: ExperimentConfig) -> list[Row]:
    """SFT-on-choice control rows: selection prompt -> the expert action, no rationale."""
    return [
        sft_row(
            selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt), wrap_action(p.expert_action), p.pair_id
        )
        for p in pairs
    ]


@sourced
def dpo_rows(pairs: Iterable[Pair], cfg: ExperimentConfig) -> list[Row]:
    """DPO control rows: action-generation prompt; expert action chosen, alternative rejected."""
    return [
        {
            "prompt": as_messages(generation_prompt(p.state, p.benchmark, cfg.prompt)),
            "chosen": assistant(wrap_action(p.expert_action)),
            "rejected": assistant(wrap_action(p.alternative_action)),
            SOURCE_KEY: p.pair_id,
        }
        for p in pairs
    ]


register(
    StageKind(name="sft_choice", algorithm="sft", data="pairs", rows=f"{__name__}:sft_choice_rows", prompt="selection",
              train="sft_choice", selection_eval=True, label="SFT-on-choice",
              summary="control: SFT on the selection prompt -> the expert action, no rationale"),
    StageKind(name="dpo", algorithm="dpo", data="pairs", rows=f"{__name__}:dpo_rows", prompt="generation", train="dpo",
              selection_eval=True, label="DPO", summary="control: DPO, expert action chosen over the alternative"),
)  # fmt: skip
