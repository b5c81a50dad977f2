"""Record types that every stage reads and writes: expert trajectories, states and ACT pairs.

Each record is one JSON line. Records are versioned (``schema_version``) and validated on read;
nothing in them depends on a tokenizer, so pairs collected with one model can train another.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

SCHEMA_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # optional fields added after files were written: left out of a record while they hold these values, so a
    # record without them keeps the bytes (and hashes) it had before they existed
    _omit_when: ClassVar[dict[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for key, empty in self._omit_when.items():
            if key in data and data[key] == empty:
                del data[key]
        return data


class Step(_Record):
    """One expert step: what the agent saw, what it did, and what it could have done."""

    observation: str = Field(description="Observation the action was taken on.")
    action: str = Field(min_length=1, description="The expert action, as executed in the env.")
    admissible_actions: list[str] = Field(description="The env's full valid-action list at this step.")
    action_admissible: bool = Field(
        description="Whether `action` (or its alias) is in `admissible_actions` as the env listed it."
    )
    admissible_alias: str | None = Field(
        default=None,
        description="The valid-list spelling of `action` when the env lists it differently "
        "(e.g. 'focus on thermometer' for 'focus on thermometer in inventory').",
    )
    score: float | None = Field(default=None, description="Env score after the action, when the env has one.")


class Trajectory(_Record):
    """One successful expert episode."""

    schema_version: Literal[1] = SCHEMA_VERSION
    trajectory_id: str = Field(min_length=1, description="Unique within a file, e.g. '<benchmark>/<task>/<variation>'.")
    benchmark: str = Field(min_length=1, description="The benchmark's name (its conf/benchmark/<name>.yaml).")
    task_id: str = Field(min_length=1)
    variation: int | None = None
    split: str
    task_description: str
    context: str = Field(
        default="",
        description="Standing instructions the agent had beside the task (a trace's system prompt); '' for none.",
    )
    origin: str | None = Field(
        default=None, description="Where the record was read from, 'file:line' (experts from a file), for messages."
    )
    steps: list[Step] = Field(min_length=1)
    _omit_when: ClassVar[dict[str, Any]] = {"context": "", "origin": None}
    score: float = Field(description="Final env score, 0-100 (a benchmark scoring 0-1 is scaled to 100).")
    success: bool
    source: str = Field(description="Where the actions came from, e.g. '<benchmark>-gold'.")


class HistoryItem(_Record):
    """A past observation and the action taken on it."""

    observation: str
    action: str


class State(_Record):
    """The decision context s_t: task, last k steps, step number, observation, admissible actions."""

    task_description: str
    context: str = Field(default="", description="The trajectory's standing instructions ('' for none).")
    _omit_when: ClassVar[dict[str, Any]] = {"context": ""}
    history: list[HistoryItem]
    step: int = Field(ge=1, description="1-based step number ('You are now at step {step}').")
    observation: str
    admissible_actions: list[str] = Field(description="The list the prompt shows (may be a bounded subset).")


class Pair(_Record):
    """An ACT pair: the expert action and one alternative (N-1 of them in K-way selection), in a seeded order."""

    schema_version: Literal[1] = SCHEMA_VERSION
    pair_id: str = Field(description="'{state_id}#{j}', unique within a file.")
    state_id: str = Field(description="'{trajectory_id}/{step_index}': the expert state this pair belongs to.")
    benchmark: str = Field(min_length=1, description="The benchmark's name (its conf/benchmark/<name>.yaml).")
    state: State
    expert_action: str = Field(min_length=1)
    alternative_action: str = Field(min_length=1, description="The first non-expert candidate (the alternative).")
    candidates: list[str] = Field(
        min_length=2, max_length=8, description="The actions in the order shown (2; N in K-way selection)."
    )
    expert_index: int = Field(ge=0, description="Where the expert action is among the candidates.")
    candidates_admissible: list[bool] = Field(
        min_length=2, max_length=8, description="Whether each candidate is in the env's full valid list."
    )
    policy: str = Field(description="Policy that sampled the alternative (HF name/folder or 'random').")

    @model_validator(mode="after")
    def _consistent(self) -> Pair:
        if len(self.candidates_admissible) != len(self.candidates):
            raise ValueError("candidates_admissible must have one flag per candidate")
        if self.expert_index >= len(self.candidates) or self.candidates[self.expert_index] != self.expert_action:
            raise ValueError("candidates[expert_index] must equal expert_action")
        if self.alternatives[0] != self.alternative_action:
            raise ValueError("the first non-expert candidate must equal alternative_action")
        return self

    @property
    def alternatives(self) -> list[str]:
        """The non-expert candidates, in the order shown."""
        return [c for i, c in enumerate(self.candidates) if i != self.expert_index]
