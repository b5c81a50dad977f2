"""ACT's stage kinds and their row builder.

GRPO on choosing the expert's action of a pair (``act``), in rounds on alternatives the newest checkpoint
re-samples (``act_onpolicy``), and without the reasoning instruction (``act_noreason``, a control).
"""

from __future__ import annotations

from collections.abc import Iterable

from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.records import Pair, Trajectory
from nemo_act.prompts.length import SOURCE_KEY
from nemo_act.prompts.render import as_messages, selection_prompt
from nemo_act.stage_data import Row, sourced
from nemo_act.stage_kinds import StageKind, register


@sourced
def act_rows(pairs: Iterable[Pair], cfg: ExperimentConfig) -> list[Row]:
    """ACT stage rows: the selection prompt and the reward's inputs."""
    return [
        {
            "prompt": as_messages(selection_prompt(p.state, p.candidates, p.benchmark, cfg.prompt)),
            "candidates": list(p.candidates),
            "expert_index": p.expert_index,
            "candidates_admissible": list(p.candidates_admissible),
            "admissible_actions": list(p.state.admissible_actions),
            "pair_id": p.pair_id,
            SOURCE_KEY: p.pair_id,
        }
        for p in pairs
    ]


@sourced
def policy_act_rows(pairs: Iterable[Pair], trajectories: Iterable[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """``act_onpolicy`` rows: :func:`act_rows` of the pairs the round's policy sampled.

    A built data kind's builder also gets the expert trajectories; these rows need nothing more than the pairs.
    """
    del trajectories
    return act_rows.__wrapped__(pairs, cfg)


register(
    StageKind(name="act", algorithm="grpo", data="pairs", rows=f"{__name__}:act_rows", prompt="selection",
              reward="selection", train="act", selection_eval=True, label="ACT",
              summary="ACT: GRPO on choosing the expert action of a pair, reasoning first"),
    StageKind(name="act_onpolicy", algorithm="grpo", data="policy_pairs", rows=f"{__name__}:policy_act_rows",
              prompt="selection", reward="selection", train="act", selection_eval=True, rounds="pairs.rounds",
              label="on-policy ACT",
              summary="ACT in pairs.rounds rounds, each on alternatives re-sampled by the newest checkpoint"),
    StageKind(name="act_noreason", algorithm="grpo", data="pairs", rows=f"{__name__}:act_rows", prompt="selection",
              reward="selection", train="act", prompt_settings={"act_reasoning": False}, selection_eval=True,
              label="no-reasoning ACT", summary="control: ACT without the reasoning instruction"),
)  # fmt: skip
