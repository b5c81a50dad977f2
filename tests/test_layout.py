"""The layout planner (``nemo-act plan``): every shipped recipe passes, broken layouts are refused by rule,
and the layouts NeMo-RL v0.7.0 ships in its own large-model example configs pass too."""

from pathlib import Path

import pytest

from nemo_act.cli import main
from nemo_act.config import conf_root, load_config
from nemo_act.engines.nemo_rl.layout import params, plan

RECIPES = sorted(p for p in (conf_root() / "recipes").glob("*/*.yaml") if p.parent.name != "_layouts")
Q8B = conf_root() / "recipes" / "alfworld" / "act-qwen3-8b-4n4g-megatron.yaml"
MOE = conf_root() / "recipes" / "alfworld" / "act-qwen3-30b-a3b-8n4g-megatron.yaml"


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_recipe_passes_the_planner(path: Path):
    result = plan(load_config(path))
    assert result.ok, result.refusals
    assert {row["stage"] for row in result.memory} == set(load_config(path).pipeline.stages)


def test_parameter_counts_match_the_models_published_sizes():
    """Qwen3-8B is 8.2B, Qwen3-32B 32.8B, Qwen3-30B-A3B 30.5B (their model cards)."""
    sizes = {m: params(load_config(overrides=[f"model={m}"]).model.architecture)["total"] / 1e9 for m in
             ("qwen3_8b", "qwen3_32b", "qwen3_30b_a3b", "qwen3_4b", "qwen3_0.6b")}  # fmt: skip
    assert sizes["qwen3_8b"] == pytest.approx(8.2, abs=0.1)
    assert sizes["qwen3_32b"] == pytest.approx(32.8, abs=0.1)
    assert sizes["qwen3_30b_a3b"] == pytest.approx(30.5, abs=0.2)
    assert sizes["qwen3_4b"] == pytest.approx(4.0, abs=0.1) and sizes["qwen3_0.6b"] == pytest.approx(0.6, abs=0.05)


@pytest.mark.parametrize(
    "recipe,overrides,rule,words",
    [
        (Q8B, ["engine.nemo_rl.megatron.tensor_parallel=3"], "world", "does not divide the 16 GPUs"),
        (Q8B, ["engine.nemo_rl.megatron.tensor_parallel=16"], "heads", "KV heads"),
        (Q8B, ["engine.nemo_rl.megatron.pipeline_parallel=5", "engine.nemo_rl.cluster.num_nodes=5"], "layers",
         "36 layers"),
        (MOE, ["engine.nemo_rl.megatron.expert_parallel=3"], "experts", "128 experts"),
        (Q8B, ["engine.nemo_rl.megatron.expert_parallel=2"], "experts", "dense model"),
        (Q8B, ["train.il.batch_size=12"], "batch", "train.il: global batch 12"),
        (Q8B, ["engine.nemo_rl.vllm.tensor_parallel=8"], "vllm", "4 GPUs of one node"),
        (Q8B, ["engine.nemo_rl.megatron.tensor_parallel=1", "engine.nemo_rl.megatron.activation_checkpointing=false",
               "engine.nemo_rl.megatron.distributed_optimizer=false"], "memory", "training needs"),
        (Q8B, ["engine.nemo_rl.vllm.gpu_memory_utilization=0.1"], "memory", "cannot hold"),
    ],
    ids=["world", "heads", "layers", "experts", "ep-on-dense", "batch", "vllm", "memory-train", "memory-vllm"],
)  # fmt: skip
def test_broken_layouts_are_refused_with_their_rule(recipe, overrides, rule, words):
    result = plan(load_config(recipe, overrides))
    assert not result.ok
    assert any(r == rule and words in reason for r, reason in result.refusals), result.refusals


def test_the_estimate_moves_the_way_the_settings_do():
    base = plan(load_config(Q8B)).memory[0]
    no_recompute = plan(load_config(Q8B, ["engine.nemo_rl.megatron.activation_checkpointing=false"])).memory[0]
    no_dist_opt = plan(load_config(Q8B, ["engine.nemo_rl.megatron.distributed_optimizer=false"])).memory[0]
    more_tp = plan(load_config(Q8B, ["engine.nemo_rl.megatron.tensor_parallel=4"])).memory[0]
    assert no_recompute["activations_gb"] > 3 * base["activations_gb"]  # the fp32 logits stay either way
    assert no_dist_opt["optimizer_gb"] == pytest.approx(8 * base["optimizer_gb"], rel=0.01)  # DP = 8
    assert more_tp["weights_gb"] < base["weights_gb"] and more_tp["train_gb"] < base["train_gb"]


@pytest.mark.parametrize(
    "model,shape,layout,seq",
    [
        # examples/configs/recipes/llm/performance/grpo-qwen3-32b-4n8g.yaml: TP4 PP4 SP, vLLM TP4, 4 x 8 GPUs, 4096
        ("qwen3_32b", (4, 8, "h100_80gb"), {"tensor_parallel": 4, "pipeline_parallel": 4, "vllm": 4}, 4096),
        # .../performance/grpo-qwen3-32b-4n4g.yaml: TP2 (PP4 from its parent), vLLM TP2, 4 x 4 GPUs
        ("qwen3_32b", (4, 4, "gh200_96gb"), {"tensor_parallel": 2, "pipeline_parallel": 4, "vllm": 2}, 4096),
        # .../grpo-qwen3-30ba3b-8n4g-megatron.yaml: TP2 PP2 EP2, vLLM TP2, 8 x 4 GPUs
        ("qwen3_30b_a3b", (8, 4, "gh200_96gb"), {"tensor_parallel": 2, "pipeline_parallel": 2, "expert_parallel": 2,
                                                 "vllm": 2}, 4096),
        # .../performance/grpo-qwen3-30ba3b-4n4g.yaml: TP1 PP1 EP16, vLLM TP1, 4 x 4 GPUs. Its vLLM engines hold
        # all 61 GB of bf16 weights each (TP=1): that needs more than 0.6 of a 96 GB GH200 (refused there, see
        # the test below), so it is checked on the 144 GB GH200
        ("qwen3_30b_a3b", (4, 4, "gh200_144gb"), {"tensor_parallel": 1, "pipeline_parallel": 1, "expert_parallel": 16,
                                                 "vllm": 1}, 4096),
    ],
    ids=["qwen3-32b-4n8g", "qwen3-32b-4n4g", "qwen3-30ba3b-8n4g", "qwen3-30ba3b-4n4g"],
)  # fmt: skip
def test_nemo_rls_own_large_model_layouts_pass(model, shape, layout, seq):
    """NeMo-RL v0.7.0 ships these layouts (its examples/configs); a planner that refused them would be wrong.
    Their sequence length and vLLM memory share (0.6, as ours) are applied."""
    nodes, gpus, gpu = shape
    mg = {k: v for k, v in layout.items() if k != "vllm"}
    overrides = [
        f"model={model}", f"engine.nemo_rl.cluster.num_nodes={nodes}", f"engine.nemo_rl.cluster.gpus_per_node={gpus}",
        f"engine.nemo_rl.cluster.gpu={gpu}", f"engine.nemo_rl.max_total_sequence_length={seq}",
        "engine.nemo_rl.megatron.sequence_parallel=true", f"engine.nemo_rl.vllm.tensor_parallel={layout['vllm']}",
        *[f"engine.nemo_rl.megatron.{k}={v}" for k, v in mg.items()],
        f"train.il.max_length={seq}",
    ]  # fmt: skip
    result = plan(load_config(Q8B, overrides))
    assert result.ok, result.refusals


def test_plan_command_prints_the_table_and_exits_nonzero_on_a_refusal(capsys):
    assert main(["plan", str(Q8B)]) == 0
    out = capsys.readouterr().out
    assert "TP=2 PP=1 CP=1 EP=1 DP=8" in out and "layout ok" in out and "act" in out
    assert main(["plan", str(Q8B), "engine.nemo_rl.megatron.tensor_parallel=3"]) == 1
    assert "layout refused (world)" in capsys.readouterr().err


def test_a_vllm_engine_that_cannot_hold_the_model_is_refused_on_the_smaller_gpu():
    mg = "engine.nemo_rl.megatron"
    overrides = ["model=qwen3_30b_a3b", f"{mg}.tensor_parallel=1", "engine.nemo_rl.vllm.tensor_parallel=1",
                 f"{mg}.expert_parallel=16", f"{mg}.sequence_parallel=false"]  # fmt: skip
    small = plan(load_config(Q8B, overrides))
    assert any(rule == "memory" and "61 GB of weights" in reason for rule, reason in small.refusals)
    assert plan(load_config(Q8B, [*overrides, "engine.nemo_rl.cluster.gpu=gh200_144gb"])).ok
