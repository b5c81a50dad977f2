"""Imitation learning and RL on the expert trajectories, and their row builders.

IL (``il``), its matched-compute control (``il_matched``: IL run for ACT's step budget), and RL on direct action
generation rewarded for the expert's action (``rl``).
"""

from __future__ import annotations

from collections.abc import Sequence

from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.records import Trajectory
from nemo_act.generation.simple import wrap_action
from nemo_act.prompts.length import SOURCE_KEY
from nemo_act.prompts.render import as_messages, generation_prompt
from nemo_act.prompts.state import expert_action, state_id
from nemo_act.stage_data import Row, expert_states, sft_row, sourced
from nemo_act.stage_kinds import StageKind, register


@sourced
def il_rows(trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """IL rows: action-generation prompt -> ``<action>expert</action>`` for every expert state."""
    return [
        sft_row(
            generation_prompt(state, traj.benchmark, cfg.prompt), wrap_action(expert_action(traj, i)), state_id(traj, i)
        )
        for traj, i, state in expert_states(trajectories, cfg)
    ]


@sourced
def rl_rows(trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """RL rows: action-generation prompt and the action reward's inputs."""
    return [
        {
            "prompt": as_messages(generation_prompt(state, traj.benchmark, cfg.prompt)),
            "expert_action": expert_action(traj, i),
            "admissible_actions": list(traj.steps[i].admissible_actions),
            "state_id": state_id(traj, i),
            SOURCE_KEY: state_id(traj, i),
        }
        for traj, i, state in expert_states(trajectories, cfg)
    ]


register(
    StageKind(name="il", algorithm="sft", data="experts", rows=f"{__name__}:il_rows", prompt="generation", train="il",
              label="IL", summary="imitation learning: SFT on expert actions"),
    StageKind(name="il_matched", algorithm="sft", data="experts", rows=f"{__name__}:il_rows", prompt="generation",
              train="il", budget_of="act", label="IL",
              summary="control: IL with ACT's step budget (train.act's epochs, max_steps): IL -> IL's first stage"),
    StageKind(name="rl", algorithm="grpo", data="experts", rows=f"{__name__}:rl_rows", prompt="generation",
              reward="action", train="rl", label="RL",
              summary="RL: GRPO on direct action generation, rewarded for the expert's action"),
)  # fmt: skip
