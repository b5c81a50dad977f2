"""Pinned first steps of every stage kind on the local engine (torchtune's recipe-test idea): a change to a
loss path (chat template, completion mask, label shift, optimizer, learning-rate schedule, DPO's beta, GRPO's
advantages, KL and clipping, the reward values and their wiring, a baseline's row builder) fails here, not only
a benchmark. Everything is built in the test (tiny Qwen3 and BPE tokenizer from our own templates, three
constructed ScienceWorld-style trajectories, random-policy pairs over them, hand-written reflection records),
so it needs no JVM and no data. Values were measured on CPU (float32) with 1 and 2 threads; the tolerances
cover summation-order differences between CPUs, not a changed computation.

What is pinned: SFT and DPO kinds, the loss at optimizer steps 1-3. GRPO kinds (ACT, ACT without reasoning,
RL), from a model warmed up by 150 IL steps so that its answers parse and groups differ: the mean reward
(exact: a mean of the configured reward values over the sampled group) and the gradient norm (the policy
gradient of the advantages, KL and clipping) at steps 1-3; their loss is ~0 by construction at on-policy
steps and is not a useful pin. If a change is meant to move a number, rerun with ``-s`` and pin the printed
values, saying why in the commit. The NeMo-RL engine trains only on GPUs: its losses are not pinned here."""

import json

import pytest

from nemo_act.config import load_config
from nemo_act.data import Trajectory
from nemo_act.engines.local.stages import train_stage
from nemo_act.kinds.act import act_rows, policy_act_rows
from nemo_act.kinds.controls import dpo_rows, sft_choice_rows
from nemo_act.kinds.imitation import il_rows, rl_rows
from nemo_act.kinds.reflection import agent_r_rows, ee_rows, sand_rows, world_model_rows
from nemo_act.tiny_model import build_tiny_model

PINNED_IL = [6.17990, 5.98660, 5.77131]  # loss at optimizer steps 1-3 (measured 2026-11-30, 1 and 2 threads)
# measured 2026-12-01, 1 and 2 threads; may change with: the kind's row builder, prompts, TRL's loss, the rewards
PINNED_LOSS: dict[str, list[float]] = {
    "sft_choice": [0.522274, 0.783712, 0.147875],
    "dpo": [0.693147, 0.748691, 0.603334],  # step 1: log 2, policy = reference
    "ee": [3.334394, 2.407403, 2.181018],
    "ee_wm": [4.429284, 1.930790, 0.825628],
    "agent_r": [2.982706, 2.281256, 2.062060],
    "sand": [3.088958, 2.645427, 2.600981],
}
# GRPO kinds: (mean reward, gradient norm) at steps 1-3; a flat group (reward_std 0) leaves the KL's gradient only
PINNED_GRPO: dict[str, list[tuple[float, float]]] = {
    "act": [(-0.375, 1.667246), (0.0, 0.006394948), (-0.375, 1.366401)],
    "act_noreason": [(-0.125, 2.011915), (0.0, 0.005219738), (-0.125, 1.550402)],
    "rl": [(0.625, 0.639091), (0.5, 2.078525), (1.0, 9.235e-07)],
}
# act_onpolicy's first round trains on pairs its starting checkpoint sampled, as act does: same rows, same numbers
PINNED_GRPO["act_onpolicy"] = PINNED_GRPO["act"]


def _trajectories() -> list[Trajectory]:
    rooms = ["kitchen", "hallway", "workshop", "greenhouse"]
    out = []
    for i in range(3):
        steps = [
            {
                "observation": f"You are in the {rooms[(i + j) % 4]}. You see a door to the {rooms[(i + j + 1) % 4]}.",
                "action": f"go to {rooms[(i + j + 1) % 4]}",
                "admissible_actions": [f"go to {r}" for r in rooms] + ["look around", "inventory"],
                "action_admissible": True,
            }
            for j in range(3)
        ]
        out.append(
            Trajectory.model_validate(
                {
                    "trajectory_id": f"scienceworld/walk/{i}", "benchmark": "scienceworld", "task_id": "walk",
                    "variation": i, "split": "train", "task_description": "Your task is to walk to the greenhouse.",
                    "steps": steps, "score": 100.0, "success": True, "source": "test",
                }
            )
        )  # fmt: skip
    return out


def test_il_first_losses_are_pinned(tmp_path):
    cfg = load_config(
        overrides=[
            "train.il.max_steps=3", "train.il.batch_size=3", "train.il.grad_accum=1", "train.il.logging_steps=1",
            "train.il.max_length=2048", "train.il.warmup_ratio=0", "train.il.learning_rate=1e-3",
        ]
    )  # fmt: skip
    model = build_tiny_model(tmp_path / "tiny", cfg.model.tiny)
    rows = il_rows(_trajectories(), cfg)
    assert len(rows) == 9
    out = train_stage("il", str(model), rows, cfg, tmp_path / "il")
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [h["loss"] for h in history if "loss" in h]
    print("measured IL losses:", losses)
    assert losses == pytest.approx(PINNED_IL, rel=1e-3)


def test_the_finetune_levers_keep_ils_losses_and_train_only_what_they_name(tmp_path):
    """model.finetune on the local engine: gradient checkpointing recomputes the same forward (IL's pinned losses);
    top_layers=1 trains the top decoder layer and the final norm only (the embeddings, tied to the output head, and
    the lower layer keep their bytes), from the same first loss."""
    from safetensors.torch import load_file

    from nemo_act.run.cache import stage_fingerprint

    base = [
        "train.il.max_steps=3", "train.il.batch_size=3", "train.il.grad_accum=1", "train.il.logging_steps=1",
        "train.il.max_length=2048", "train.il.warmup_ratio=0", "train.il.learning_rate=1e-3",
    ]  # fmt: skip
    cfg = load_config(overrides=base)
    model = build_tiny_model(tmp_path / "tiny", cfg.model.tiny)
    rows = il_rows(_trajectories(), cfg)

    def losses(out):
        history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        return [h["loss"] for h in history if "loss" in h]

    ckpt = load_config(
        overrides=[*base, "+model.finetune.gradient_checkpointing=true", "+model.finetune.top_layers=null"]
    )
    out = train_stage("il", str(model), rows, ckpt, tmp_path / "ckpt")
    assert losses(out) == pytest.approx(PINNED_IL, rel=1e-3)
    top = load_config(overrides=[*base, "+model.finetune.gradient_checkpointing=false", "+model.finetune.top_layers=1"])
    out = train_stage("il", str(model), rows, top, tmp_path / "top")
    measured = losses(out)
    assert measured[0] == pytest.approx(PINNED_IL[0], rel=1e-3) and measured[1:] != pytest.approx(PINNED_IL[1:])
    before, after = load_file(model / "model.safetensors"), load_file(out / "model.safetensors")
    same = {k for k in before if before[k].equal(after[k])}
    assert {k for k in before if ".layers.0." in k or "embed_tokens" in k} <= same
    assert {k for k in before if ".layers.1." in k or k == "model.norm.weight"}.isdisjoint(same)
    # a lever changes what a stage makes: a finished stage made without it is trained again
    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    prints = {stage_fingerprint("il", str(model), data, c) for c in (cfg, ckpt, top)}
    assert len(prints) == 3
    too_many = load_config(
        overrides=[*base, "+model.finetune.gradient_checkpointing=false", "+model.finetune.top_layers=3"]
    )
    with pytest.raises(ValueError, match="top_layers=3: the model has 2 decoder layers"):
        train_stage("il", str(model), rows, too_many, tmp_path / "x")


WARM = [  # IL from scratch until the tiny model writes parsable actions (GRPO needs groups that differ)
    "train.il.max_steps=150", "train.il.batch_size=3", "train.il.grad_accum=1", "train.il.logging_steps=50",
    "train.il.max_length=2048", "train.il.warmup_ratio=0", "train.il.learning_rate=3e-3",
]  # fmt: skip


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> str:
    """The tiny model after 150 IL steps on the three trajectories (~15 s on 2 cores)."""
    folder = tmp_path_factory.mktemp("warm")
    cfg = load_config(overrides=WARM)
    model = build_tiny_model(folder / "tiny", cfg.model.tiny)
    return str(train_stage("il", str(model), il_rows(_trajectories(), cfg), cfg, folder / "il"))


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> list:
    """One random-policy pair per expert state of the three trajectories (seeded)."""
    from nemo_act.data import Pair, read_jsonl, write_jsonl
    from nemo_act.generation import RandomGenerator
    from nemo_act.steps.pairs import collect_pairs

    folder = tmp_path_factory.mktemp("pairs")
    write_jsonl(folder / "experts.jsonl", _trajectories())
    cfg = load_config(overrides=["pairs.min_state_share=0"])
    collect_pairs(folder / "experts.jsonl", RandomGenerator(), cfg, folder / "pairs.jsonl", k=1, progress=False)
    return list(read_jsonl(folder / "pairs.jsonl", Pair))


def _records(kind: str, trajs: list) -> list:
    """Hand-written audit records of a reflection baseline over the three trajectories (each kept)."""
    from nemo_act.reflection.agent_r import RevisionRecord, WrongStep
    from nemo_act.reflection.early_experience import Candidate, ReflectionRecord
    from nemo_act.reflection.sand import DeliberationRecord

    out = []
    for t in trajs:
        for i, step in enumerate(t.steps[:2]):
            other = next(a for a in step.admissible_actions if a != step.action)
            sid = f"{t.trajectory_id}/{i}"
            if kind in ("ee", "ee_wm"):
                cands = [
                    Candidate(action=step.action, source="expert", observation=f"You walk: {step.action}."),
                    Candidate(action=other, source="admissible", observation=f"Nothing happens after {other}."),
                ]
                text = f"<think>{other} leads nowhere; {step.action} moves on.</think><action>{step.action}</action>"
                record = {"state_id": sid, "trajectory_id": t.trajectory_id, "index": i, "expert_action": step.action}
                out.append(ReflectionRecord(**record, candidates=cands, reflection=text, kept=True, reason="kept"))
            elif kind == "sand":
                out.append(DeliberationRecord(state_id=sid, trajectory_id=t.trajectory_id, index=i,
                           expert_action=step.action, deliberation=f"Weighing {other} against {step.action}: go on.",
                           kept=True, reason="kept"))  # fmt: skip
        if kind == "agent_r":
            wrong = WrongStep(
                observation=t.steps[1].observation, action="inventory", next_observation="You carry nothing."
            )
            out.append(RevisionRecord(trajectory_id=t.trajectory_id, rollout_actions=[t.steps[0].action, "inventory"],
                       deviation=1, wrong=[wrong], revision="That was no step forward; back to the route.",
                       kept=True, reason="kept"))  # fmt: skip
    return out


def _stage_rows(kind: str, cfg, pairs: list) -> list:
    from nemo_act.stage_data import stage_experiment

    scfg = stage_experiment(kind, cfg)
    trajs = _trajectories()
    builders = {
        "act": lambda: act_rows(pairs, scfg),
        "act_noreason": lambda: act_rows(pairs, scfg),
        "act_onpolicy": lambda: policy_act_rows(pairs, trajs, scfg),
        "sft_choice": lambda: sft_choice_rows(pairs, scfg),
        "dpo": lambda: dpo_rows(pairs, scfg),
        "rl": lambda: rl_rows(trajs, scfg),
        "ee": lambda: ee_rows(_records("ee", trajs), trajs, scfg),
        "ee_wm": lambda: world_model_rows(_records("ee_wm", trajs), trajs, scfg),
        "agent_r": lambda: agent_r_rows(_records("agent_r", trajs), trajs, scfg),
        "sand": lambda: sand_rows(_records("sand", trajs), trajs, scfg),
    }
    return builders[kind]()


def _quick(kind: str) -> list[str]:
    from nemo_act.stage_kinds import stage_kind

    block = stage_kind(kind).train
    common = [f"train.{block}.{k}" for k in ("max_steps=3", "batch_size=4", "grad_accum=1", "logging_steps=1")]
    if stage_kind(kind).algorithm == "grpo":
        return common + [f"train.{block}.num_generations=4", f"train.{block}.max_completion_length=24",
                         f"train.{block}.learning_rate=1e-3"]  # fmt: skip
    return common + [f"train.{block}.max_length=2048", f"train.{block}.learning_rate=1e-3",
                     f"train.{block}.warmup_ratio=0"]  # fmt: skip


KINDS = ["act", "act_noreason", "act_onpolicy", "rl", "sft_choice", "dpo", "ee", "ee_wm", "agent_r", "sand"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_stage_kinds_first_steps_are_pinned(kind, warm, pairs, tmp_path):
    from nemo_act.stage_kinds import STAGE_KINDS, stage_kind

    # a new stage kind gets a pin here; il_matched is IL's rows and settings with ACT's step budget (test_bench.py)
    assert set(KINDS) | {"il", "il_matched"} == set(STAGE_KINDS)
    cfg = load_config(overrides=_quick(kind))
    rows = _stage_rows(kind, cfg, pairs)
    assert rows
    out = train_stage(kind, warm, rows, cfg, tmp_path / kind)
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [h for h in steps if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2, 3]
    if stage_kind(kind).algorithm == "grpo":
        measured = [(h["reward"], h["grad_norm"]) for h in steps]
        print(f"measured {kind} (reward, grad_norm):", measured)
        pinned = PINNED_GRPO[kind]
        assert [r for r, _ in measured] == pytest.approx([r for r, _ in pinned], abs=1e-6)
        assert [g for _, g in measured] == pytest.approx([g for _, g in pinned], rel=2e-3, abs=1e-7)
        assert any(r != pinned[0][0] for r, _ in pinned) or any(h["reward_std"] > 0 for h in steps)  # not flat
    else:
        measured_loss = [h["loss"] for h in steps]
        print(f"measured {kind} losses:", measured_loss)
        assert measured_loss == pytest.approx(PINNED_LOSS[kind], rel=1e-3)


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("act", "rewards.selection.malformed=-0.4"),
        ("rl", "rewards.action.correct=0.8"),
        ("dpo", "train.dpo.beta=0.5"),
        ("act", "train.act.beta=0.1"),
    ],  # fmt: skip
)
def test_a_changed_coefficient_moves_the_pinned_numbers(kind, change, warm, pairs, tmp_path):
    """The pins are sensitive to the loss math they guard: one changed coefficient and they no longer match."""
    from nemo_act.stage_kinds import stage_kind

    cfg = load_config(overrides=[*_quick(kind), change])
    out = train_stage(kind, warm, _stage_rows(kind, cfg, pairs), cfg, tmp_path / kind)
    steps = [h for h in (json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()) if "loss" in h]
    if stage_kind(kind).algorithm == "grpo":
        flat = [x for h in steps for x in (h["reward"], h["grad_norm"])]
        assert flat != pytest.approx([x for pair in PINNED_GRPO[kind] for x in pair], rel=2e-3, abs=1e-6)
    else:
        assert [h["loss"] for h in steps] != pytest.approx(PINNED_LOSS[kind], rel=1e-3)
