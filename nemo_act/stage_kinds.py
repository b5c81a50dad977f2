"""The one table of stage kinds: what each trains with, on which data, with which prompt and reward.

A registry on a low floor (docs/architecture.md): it imports only :mod:`nemo_act.common.plugins`, so the config schema
checks ``pipeline.stages`` and the ``train`` blocks against it; what needs a config or a prompt (a stage's
hyperparameters, its rows) is in :mod:`nemo_act.stage_data` and the kinds' own modules.

Every consumer reads this table instead of naming kinds: the config schema (which names are valid), the
row builders (:func:`nemo_act.stage_data.rows_for`), the pipeline runner (which data steps a pipeline
needs, after which stages held-out selection accuracy is measured), the local engine (trainer and
reward functions) and the cluster engine (NeMo-RL algorithm, task name, hyperparameter block).

Adding a kind = one module that gives :func:`register` a :class:`StageKind` declared with keywords, its row builder
a ``module:function`` reference (like a :class:`DataKind`'s builder), and one YAML (the pipeline that runs it, with
a ``train.<block>`` of its own if it needs one). The same module either way: inside nemo-act it is a module of
:mod:`nemo_act.kinds` (every one is imported at the table's first read), outside it a module of yours that the
config's ``extensions`` list names (imported before the config is validated, in every process that loads it). A
stage that consumes a new kind of data registers a :class:`DataKind` (its builder, audit file and record type) the
same way, and a GRPO stage with a reward of its own a :class:`RewardKind` (its score function; both engines score
with it). Nothing else names a kind: docs/extending.md.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nemo_act.common.plugins import import_module


@dataclass(frozen=True)
class DataKind:
    """One kind of data a stage consumes, and the step that builds it.

    Attributes:
        name: The kind, as a :class:`StageKind`'s ``data``.
        builder: ``module:function`` that builds it (``(cfg, experts, generator, folder, workers)`` ->
            :class:`~nemo_act.data.manifest.Summary`); None for the runner's own steps (experts, pairs).
        audit: The audit file the builder writes in its folder (the stage's rows are made from it).
        record: ``module:Class`` of the audit file's lines.
        config: The config block of its settings (``early_experience``, ``sand``, ``agent_r``); part of the
            fingerprint of every stage that consumes it (a row-mixing setting changes no audit file).
        policy: Whose samples the builder uses: ``init`` (the pipeline's initial policy, built once before
            the stages) or ``stage`` (the checkpoint the consuming stage starts from, built right before it:
            SAND's "current policy", so a second ``sand`` stage re-samples with the newest checkpoint); a
            ``stage`` builder also takes ``critic=`` (the frozen initial policy).
        summary: What ``nemo-act reflection`` prints after building it: a format string over the summary's
            counts, ``{out}`` (the audit file) and ``{dropped}`` (its reasons, joined).
        env: Whether the builder plays the benchmark's env from the expert states (branching, roll-ons): the runner
            then checks the experts have env episodes before anything is built (the reflection baselines do;
            a kind built from the trajectories alone does not).
    """

    name: str
    builder: str | None = None
    audit: str | None = None
    record: str | None = None
    config: str | None = None
    policy: Literal["init", "stage"] = "init"
    summary: str = "{kept} kept -> {out}\ndropped: {dropped}"
    env: bool = True


DATA_KINDS: dict[str, DataKind] = {
    d.name: d
    for d in (
        DataKind("experts"),
        DataKind("pairs"),
        DataKind("policy_pairs", "nemo_act.steps.pairs:build_policy_pairs", "pairs.jsonl",
                 "nemo_act.data.records:Pair", "pairs", policy="stage", env=False,
                 summary="{pairs} pairs from {states} states, sampled by the current policy -> {out}\n"
                         "samples dropped: {dropped}"),
        DataKind("early_experience", "nemo_act.reflection.early_experience:build_early_experience",
                 "reflections.jsonl", "nemo_act.reflection.early_experience:ReflectionRecord", "early_experience",
                 summary="{kept} of {states} reflections kept -> {out}\ndropped: {dropped}; alternatives: "
                         "{alternatives}; actions executed in the env: {executed}"),
        DataKind("agent_r", "nemo_act.reflection.agent_r:build_agent_r", "revisions.jsonl",
                 "nemo_act.reflection.agent_r:RevisionRecord", "agent_r",
                 summary="{kept} of {episodes} episodes revised -> {out}\nnot revised: {dropped}"),
        DataKind("sand", "nemo_act.reflection.sand:build_sand", "deliberations.jsonl",
                 "nemo_act.reflection.sand:DeliberationRecord", "sand", policy="stage",
                 summary="{kept} of {states} deliberations kept -> {out}\nnone for: {dropped}; candidates rolled "
                         "on: {candidates}; roll-on env steps: {rollout_env_steps}"),
    )
}  # fmt: skip


@dataclass(frozen=True)
class RewardKind:
    """A GRPO reward: the score of one response, from the fields of the row it answers.

    Attributes:
        name: The reward, as a :class:`StageKind`'s ``reward``.
        score: ``module:function``: ``(response, row, values, use_admissible) -> RewardParts``
            (:class:`~nemo_act.rewards.RewardParts`: accuracy, admissible, format). ``row`` is the stage row without
            its prompt (what the stage's row builder put there: both engines hand the same fields over), ``values``
            the config block below, ``use_admissible`` the benchmark's ``admissible_reward``. Only the final
            ``<action>`` should be scored (:func:`~nemo_act.rewards.parse_action`), never the reasoning.
        values: The config block of its values (``rewards.selection`` or ``rewards.action``: correct, admissible,
            malformed).
        selection: Whether the response chooses among candidates: its logs then carry the selection accuracy and
            the share naming neither candidate (else the share matching the expert).
        task: NeMo-RL's task and environment name of its rows (default ``reward_<name>``).
    """

    name: str
    score: str
    values: str
    selection: bool = False
    task: str = ""

    @property
    def environment(self) -> str:
        """NeMo-RL's environment (and row ``task_name``) of this reward."""
        return self.task or f"reward_{self.name}"


REWARD_KINDS: dict[str, RewardKind] = {
    r.name: r
    for r in (
        RewardKind("selection", "nemo_act.rewards:score_selection", "rewards.selection", selection=True,
                   task="act_selection"),
        RewardKind("action", "nemo_act.rewards:score_action", "rewards.action", task="act_action"),
    )
}  # fmt: skip


def reward_kind(name: str) -> RewardKind:
    """The registry entry of reward ``name``; a clear error listing the rewards when there is none."""
    try:
        return REWARD_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown reward '{name}'; rewards are: {', '.join(REWARD_KINDS)}") from None


@dataclass(frozen=True, kw_only=True)
class StageKind:
    """One stage kind.

    Attributes:
        name: The kind, as written in ``pipeline.stages``.
        algorithm: ``grpo``, ``sft`` or ``dpo`` (TRL's trainers; NeMo-RL's algorithms).
        data: What it consumes, a :data:`DATA_KINDS` name: ``pairs`` (ACT pairs), ``experts`` (expert
            trajectories) or a reflection baseline's audit file (:mod:`nemo_act.reflection`).
        rows: ``module:function`` of its row builder: ``(pairs | trajectories, cfg) -> rows``, or
            ``(records, trajectories, cfg)`` for a built data kind (the builders of :mod:`nemo_act.stage_data`
            show the row fields each algorithm and reward reads; the shipped kinds' builders are there).
        prompt: ``selection`` (the ACT prompt over two candidates) or ``generation`` (act directly).
        train: The ``train.<block>`` holding its hyperparameters.
        reward: GRPO reward, a :data:`REWARD_KINDS` name: ``selection`` (names the better candidate), ``action``
            (the expert's action), or one registered by an extension; None for SFT and DPO.
        prompt_settings: ``prompt.*`` values the stage renders with (e.g. no reasoning instruction).
        selection_eval: Whether held-out selection accuracy is measured after it.
        summary: One line for help texts and docs.
        rounds: A config key (``sand.iterations``) saying how many times the stage runs in a row where a
            pipeline lists it once; each round's data is built by the newest checkpoint (see :func:`expand`).
        label: How the paper's table names the stage in a pipeline it has no row for (``ACT``: a pipeline
            ``act, il`` of yours is "<its name> (ACT -> IL)"); default: the kind's name.
        budget_of: Another ``train.<block>`` whose step budget (``epochs``, ``max_steps``) the stage takes instead
            of its own block's: the matched-compute control's IL runs as many optimizer steps as ACT.
    """

    name: str
    algorithm: Literal["grpo", "sft", "dpo"]
    data: str
    rows: str
    prompt: Literal["selection", "generation"]
    train: str
    reward: str | None = None
    prompt_settings: dict[str, Any] = field(default_factory=dict)
    selection_eval: bool = False
    summary: str = ""
    rounds: str | None = None
    budget_of: str | None = None
    label: str = ""

    def __post_init__(self) -> None:
        if self.data not in DATA_KINDS:
            known = ", ".join(DATA_KINDS)
            raise ValueError(f"stage kind '{self.name}': data '{self.data}' is not a data kind ({known})")
        if ":" not in self.rows:
            raise ValueError(f"stage kind '{self.name}': rows {self.rows!r} is not a 'module:function' reference")
        if (self.reward is not None) != (self.algorithm == "grpo"):
            need = "needs a" if self.algorithm == "grpo" else "takes no"
            raise ValueError(f"stage kind '{self.name}': a {self.algorithm} stage {need} reward")
        if self.reward is not None and self.reward not in REWARD_KINDS:
            raise ValueError(
                f"stage kind '{self.name}': reward '{self.reward}' is not registered ({', '.join(REWARD_KINDS)}); "
                "register its RewardKind first"
            )


SHIPPED = "nemo_act.kinds"  # the package of the shipped kinds: each of its modules registers its own


class _Registry(MutableMapping[str, StageKind]):
    """The stage kinds by name: those nemo-act ships and those an extension registered.

    The shipped ones are declared in the modules of :mod:`nemo_act.kinds`, each with its row builders (a higher floor:
    they render prompts), so the table imports every module of that package (found on disk, named nowhere) the first
    time it is read, the way the config's ``extensions`` are imported by name: no import statement goes up a floor.
    Every read goes through ``__getitem__``, ``__iter__`` or ``__len__`` (``get``, ``in``, ``keys``, ``items`` and
    ``values`` are the mapping's own, built on them), and each of those loads first.
    """

    def __init__(self) -> None:
        self._kinds: dict[str, StageKind] = {}
        self.loaded = False
        self.loading = False

    def load(self) -> None:
        """Import the shipped kinds' modules once (their ``register`` calls read the table while it loads).

        Raises:
            ValueError: A module of :mod:`nemo_act.kinds` cannot be imported (the next read tries again).
        """
        if self.loaded or self.loading:
            return
        self.loading = True
        try:
            package = import_module(SHIPPED, "the shipped stage kinds")
            for module in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
                import_module(f"{SHIPPED}.{module}", "the shipped stage kinds")
            self.loaded = True
        finally:
            self.loading = False

    def __getitem__(self, name: str) -> StageKind:
        self.load()
        return self._kinds[name]

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(self._kinds)

    def __len__(self) -> int:
        self.load()
        return len(self._kinds)

    def __setitem__(self, name: str, entry: StageKind) -> None:
        self._kinds[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._kinds[name]


STAGE_KINDS: MutableMapping[str, StageKind] = _Registry()


def register(*entries: StageKind | DataKind | RewardKind) -> None:
    """Add stage kinds, data kinds or rewards to the registry (what a module of :mod:`nemo_act.kinds` does, or yours).

    A module of yours is named in the config's ``extensions``; the shipped kinds are registered first, so a name of
    theirs is taken. Registering the same entry again is a no-op (a module imported twice); another entry under a taken
    name is an error.

    Raises:
        ValueError: The name is taken by a different entry.
    """
    tables: dict[type, MutableMapping[str, Any]] = {
        StageKind: STAGE_KINDS, DataKind: DATA_KINDS, RewardKind: REWARD_KINDS
    }  # fmt: skip
    for entry in entries:
        table = tables[type(entry)]
        old = table.get(entry.name)
        if old is not None and old != entry:
            raise ValueError(f"{type(entry).__name__} '{entry.name}' is already registered as {old}")
        table[entry.name] = entry


def import_extensions(modules: Sequence[str], source: str) -> None:
    """Import the config's ``extensions`` (each registers its kinds on import).

    Raises:
        ValueError: A module cannot be imported (the message names the config file and the field).
    """
    for name in modules:
        import_module(name, f"{source}: field 'extensions'")


def stage_kind(name: str) -> StageKind:
    """The table entry of ``name``; a clear error listing the kinds when there is none."""
    try:
        return STAGE_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown stage '{name}'; stages are: {', '.join(STAGE_KINDS)}") from None


def data_steps(stages: list[str]) -> list[str]:
    """The data a pipeline of these stages consumes, in the order the runner builds it (experts first)."""
    wanted = {stage_kind(k).data for k in stages}
    return [d for d in DATA_KINDS if d in wanted or d == "experts"]


def built_kinds() -> dict[str, DataKind]:
    """Every data kind a builder makes, by its name and by the name of each stage kind that consumes it.

    What ``nemo-act reflection METHOD`` accepts: ``ee`` and ``early_experience`` name the same data.
    """
    out = {name: d for name, d in DATA_KINDS.items() if d.builder}
    out |= {k.name: DATA_KINDS[k.data] for k in STAGE_KINDS.values() if DATA_KINDS[k.data].builder}
    return out


def built_data(kind: str) -> DataKind | None:
    """The table entry of a data kind a builder makes (a reflection baseline's), else None."""
    spec = DATA_KINDS[kind]
    return spec if spec.builder else None


def needs_pairs(stages: list[str]) -> bool:
    """Whether a pipeline of these stages needs ACT pairs (and so held-out pairs for selection accuracy).

    A stage measured on held-out selection needs them too, though it samples its own (``act_onpolicy``).
    """
    return any(stage_kind(k).data == "pairs" or stage_kind(k).selection_eval for k in stages)
