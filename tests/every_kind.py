"""Every registered stage kind's training rows, its data built the way the pipeline builds it.

Used by the tests that must cover each stage kind the registry holds, a kind added later included, without naming
any: ``tests/test_stage_kinds.py`` (the cluster engine's dry run prepares each, in ``make test``) and
``tests/test_cluster_twin.py`` (NeMo-RL's own example scripts and our driver on each, in ``make test-cluster``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from scripted_policy import ScriptedPolicy

from nemo_act.common.plugins import load
from nemo_act.config import load_config
from nemo_act.data import Trajectory, read_jsonl
from nemo_act.stage_data import rows_for, stage_experiment
from nemo_act.stage_kinds import STAGE_KINDS, built_data, stage_kind
from nemo_act.steps.pairs import collect_pairs

# The smallest settings that keep rows of every kind: Early Experience branches 2 alternatives a state, SAND rolls
# on 2 candidates one step each, Agent-R's rollouts stop after 6 steps; the data steps' own code otherwise.
DATA_SETTINGS = ["early_experience.k=2", "sand.candidates=2", "sand.rollout_steps=1", "benchmark.max_steps=6",
                 "agent_r.envs_per_worker=1"]  # fmt: skip


def every_kind_rows(folder: Path, experts: Path, settings: Sequence[str] = ()) -> dict[str, Path]:
    """A rows file per registered stage kind, under ``folder``.

    The expert trajectories, ACT pairs sampled as the runner's pairs step samples them, and each built data kind
    (``policy_pairs``, Early Experience, SAND, Agent-R) by the kind's own builder (``DATA_KINDS[...].builder``,
    called as ``PipelineRunner.baseline_data`` calls it), playing the env where it does (from the shortest expert
    trajectory: the least env time); then each kind's rows by ``stage_data.rows_for``, as the runner hands them to an
    engine. The policy is the reflection tests' scripted one (random alternatives, well-formed reflections,
    critiques and deliberations: tests/scripted_policy.py), so every kind keeps rows. ``settings``: more config
    overrides (shorter prompts for a model that costs more per token).
    """
    cfg = load_config(overrides=[*DATA_SETTINGS, *settings, f"run_dir={folder / 'run'}"])
    shortest = folder / "experts.jsonl"
    shortest.write_text(min(read_jsonl(experts, Trajectory), key=lambda t: len(t.steps)).model_dump_json() + "\n")
    policy = ScriptedPolicy()
    data: dict[str, Path] = {"experts": experts}
    files = {}
    for kind in STAGE_KINDS:
        need = stage_kind(kind).data
        if need == "pairs" and need not in data:
            data[need] = collect_pairs(experts, policy, cfg, folder / "pairs.jsonl", progress=False).out
        elif need not in data:
            spec = built_data(need)
            assert spec is not None and spec.builder, f"{kind}: data kind {need} has no builder"
            extra = {"critic": policy} if spec.policy == "stage" else {}
            source = shortest if spec.env else experts  # env-bound builders: the shortest path, the least env time
            data[need] = load(spec.builder)(cfg, source, policy, folder / need, 1, progress=False, **extra).out
        rows = rows_for(kind, data[need], stage_experiment(kind, cfg))
        assert rows, f"{kind}: no rows from {data[need]}"
        files[kind] = folder / f"{kind}.jsonl"
        files[kind].write_text("".join(json.dumps(r) + "\n" for r in rows))
    return files
