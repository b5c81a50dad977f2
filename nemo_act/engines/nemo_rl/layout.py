"""The layout planner (``nemo-act plan``): refuse a layout that cannot run, estimate memory per GPU (engine-free).

A cluster job waits in the queue, brings up Ray and converts the model before Megatron finds that TP
does not divide the KV heads or that the optimizer state does not fit. The Slurm job runs this first,
before Ray. Rules (each refusal names its rule):

* ``world``: TP x PP x CP divides the job's GPUs (the rest is data parallel, DP);
* ``heads``: TP divides the attention heads and the KV heads (Megatron splits query groups whole; it
  does not replicate KV heads);
* ``layers``: PP divides the layers (we configure no uneven split);
* ``experts``: EP divides the experts, and EP x ETP divides the GPUs of one pipeline stage;
* ``batch``: every stage's global batch divides into micro batches over DP (NeMo-RL asserts it);
* ``vllm``: vLLM's TP divides the attention heads and fits one node;
* ``memory``: training and generation estimates fit the GPU (below).

Memory per GPU (GB = 1e9 bytes), an estimate of ours to refuse layouts that are far off, not a profile:

* weights: 2 bytes (bf16) per parameter on the GPU: non-expert parameters / (TP x PP), expert
  parameters / (EP x ETP x PP), embeddings and output layer / TP on their stage;
* gradients: 4 bytes (fp32 main grads, NeMo-RL's Megatron default ``grad_reduce_in_fp32``-style buffers);
* optimizer: Adam's fp32 master weights + two moments = 12 bytes per parameter, / DP with the
  distributed optimizer (expert parameters / expert-DP);
* activations per micro batch (Korthikanti et al. 2022, flash attention, bytes): with full recompute
  ``2 s h`` per layer kept (/TP with sequence parallel) x layers per stage x the micro batches a 1F1B
  pipeline keeps in flight (PP), plus one layer's working set ``34 s h / TP``; without recompute
  ``34 s h / TP`` per layer; plus the fp32 logits ``4 s V / TP`` twice (logits and their gradient);
* a fixed 4 GB for the CUDA context, NCCL buffers and fragmentation.

Generation (colocated vLLM, NeMo-RL's default): vLLM takes ``gpu_memory_utilization`` of the GPU,
the trainer's bf16 weights stay resident (optimizer state and gradients are offloaded meanwhile); vLLM
must hold its share of the bf16 weights and the KV cache of one full-length sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from nemo_act.config.schema import ExperimentConfig, GRPOStageConfig, ModelArchitecture
from nemo_act.engines import engine_for
from nemo_act.evaluation.rollout import planned_lanes
from nemo_act.generation import engines_summary, planned_engines
from nemo_act.stage_data import stage_config
from nemo_act.stage_kinds import stage_kind

GPU_MEMORY_GB = {"gh200_96gb": 96.0, "gh200_144gb": 144.0, "h100_80gb": 80.0, "h200_141gb": 141.0}
OVERHEAD_GB = 4.0
USABLE = 0.95  # of the GPU's memory that a job can count on


@dataclass
class Plan:
    """What ``nemo-act plan`` found for one recipe."""

    gpus: int
    dp: int
    refusals: list[tuple[str, str]] = field(default_factory=list)  # (rule, reason)
    memory: list[dict[str, float | str]] = field(default_factory=list)  # one row per stage kind

    @property
    def ok(self) -> bool:
        """True when no rule refused the layout."""
        return not self.refusals


def params(a: ModelArchitecture) -> dict[str, float]:
    """Parameter counts: attention + dense MLP + norms per layer, experts, embeddings (and output layer)."""
    attn = a.hidden * a.head_dim * (a.heads + 2 * a.kv_heads) + a.heads * a.head_dim * a.hidden
    if a.experts:
        mlp, experts = a.hidden * a.experts, 3 * a.hidden * a.expert_ffn * a.experts  # router; experts
    else:
        mlp, experts = 3 * a.hidden * a.ffn, 0
    embed = a.vocab * a.hidden * (1 if a.tied_embeddings else 2)
    return {
        "dense": a.layers * (attn + mlp + 2 * a.hidden),
        "experts": a.layers * experts,
        "embed": embed,
        "total": a.layers * (attn + mlp + experts + 2 * a.hidden) + embed,
    }


def _stage_seq(kind: str, cfg: ExperimentConfig) -> int:
    sc = stage_config(kind, cfg)
    if isinstance(sc, GRPOStageConfig):
        return cfg.engine.nemo_rl.max_total_sequence_length  # type: ignore[union-attr]
    return sc.max_length  # type: ignore[union-attr]


def plan(cfg: ExperimentConfig, kinds: tuple[str, ...] | None = None) -> Plan:
    """Check the layout of ``cfg`` (a cluster recipe) and estimate memory per GPU for each stage kind.

    Args:
        cfg: Experiment config with ``engine.nemo_rl`` and ``model.architecture``.
        kinds: Stage kinds to estimate (default: the pipeline's).

    Raises:
        ValueError: The config is not a cluster recipe or its model has no architecture.
    """
    n = cfg.engine.nemo_rl
    a = cfg.model.architecture
    if n is None or a is None:
        raise ValueError("nemo-act plan needs a cluster recipe (engine.nemo_rl) whose model has an architecture")
    mg, sh = n.megatron, n.cluster
    tp, pp, cp, ep = mg.tensor_parallel, mg.pipeline_parallel, mg.context_parallel, mg.expert_parallel
    etp = mg.expert_tensor_parallel or 1
    gpus = sh.num_nodes * sh.gpus_per_node
    model_parallel = tp * pp * cp
    out = Plan(gpus=gpus, dp=max(gpus // model_parallel, 1))
    refuse = out.refusals.append
    if gpus % model_parallel:
        refuse(("world", f"TP x PP x CP = {tp} x {pp} x {cp} = {model_parallel} does not divide the {gpus} GPUs"))
    if a.heads % tp or a.kv_heads % tp:
        refuse(("heads", f"TP={tp} must divide the {a.heads} attention heads and the {a.kv_heads} KV heads"))
    if a.layers % pp:
        refuse(("layers", f"PP={pp} does not divide the {a.layers} layers (no uneven split is configured)"))
    if ep > 1 and not a.experts:
        refuse(("experts", f"EP={ep} on a dense model"))
    elif a.experts and a.experts % ep:
        refuse(("experts", f"EP={ep} does not divide the {a.experts} experts"))
    if (gpus // pp) % (ep * etp):
        refuse(("experts", f"EP x ETP = {ep} x {etp} does not divide the {gpus // pp} GPUs of a pipeline stage"))
    v = n.vllm.tensor_parallel
    if v > sh.gpus_per_node or sh.gpus_per_node % v:
        refuse(("vllm", f"vLLM TP={v} must divide the {sh.gpus_per_node} GPUs of one node"))
    if a.heads % v:
        refuse(("vllm", f"vLLM TP={v} does not divide the {a.heads} attention heads"))
    kinds = kinds or tuple(dict.fromkeys(cfg.pipeline.stages))
    for kind in kinds:
        sc = stage_config(kind, cfg)
        batch = sc.batch_size * sc.grad_accum
        if batch % (out.dp * n.micro_batch_size):
            refuse((
                "batch",
                f"train.{stage_kind(kind).train}: global batch {batch} is not a multiple of DP x micro batch = "
                f"{out.dp} x {n.micro_batch_size}",
            ))  # fmt: skip
        out.memory.append(_memory(kind, cfg, a, out.dp))
    limit = GPU_MEMORY_GB[sh.gpu] * USABLE
    for row in out.memory:
        if row["train_gb"] > limit:
            refuse(("memory", f"{row['stage']}: training needs ~{row['train_gb']:.0f} GB per GPU, the "
                              f"{sh.gpu} offers ~{limit:.0f} GB (raise TP/PP, turn on recompute or the "
                              f"distributed optimizer)"))  # fmt: skip
        if row["generation_gb"] > limit or row["kv_gb"] < 0:
            refuse(("memory", f"{row['stage']}: vLLM's share ({n.vllm.gpu_memory_utilization:.2f} of the GPU) "
                              f"cannot hold its {row['vllm_weights_gb']:.0f} GB of weights and one "
                              f"{_stage_seq(row['stage'], cfg)}-token sequence's KV cache next to the trainer's "
                              "weights"))  # fmt: skip
    return out


def _memory(kind: str, cfg: ExperimentConfig, a: ModelArchitecture, dp: int) -> dict[str, float | str]:
    n = cfg.engine.nemo_rl
    assert n is not None
    mg = n.megatron
    tp, pp, ep, etp = mg.tensor_parallel, mg.pipeline_parallel, mg.expert_parallel, mg.expert_tensor_parallel or 1
    p = params(a)
    # the input embedding sits on the first stage, the output layer on the last: one of them per GPU when PP > 1
    embed_gpu = (a.vocab * a.hidden if pp > 1 else p["embed"]) / tp
    on_gpu = p["dense"] / (tp * pp) + embed_gpu + p["experts"] / (ep * etp * pp)
    expert_dp = max(1, dp * tp // (ep * etp))
    weights = 2 * on_gpu
    grads = 4 * on_gpu
    dense_gpu = on_gpu - p["experts"] / (ep * etp * pp)
    sharded = (dense_gpu / dp + (on_gpu - dense_gpu) / expert_dp) if mg.distributed_optimizer else on_gpu
    optimizer = 12 * sharded
    s, h, b = _stage_seq(kind, cfg), a.hidden, n.micro_batch_size
    if stage_kind(kind).algorithm == "dpo":
        b *= 2  # chosen and rejected
    s_local = s / mg.context_parallel
    per_layer_full = 34 * s_local * b * h / tp
    layers_here = a.layers / pp
    if mg.activation_checkpointing:
        kept = 2 * s_local * b * h / (tp if mg.sequence_parallel else 1)
        acts = kept * layers_here * pp + per_layer_full  # 1F1B: the first stage holds PP micro batches
    else:
        acts = per_layer_full * layers_here * pp
    logits = 2 * 4 * s_local * b * a.vocab / tp
    train = (weights + grads + optimizer + acts + logits) / 1e9 + OVERHEAD_GB
    gpu = GPU_MEMORY_GB[n.cluster.gpu]
    vllm_share = n.vllm.gpu_memory_utilization * gpu
    vllm_weights = 2 * p["total"] / n.vllm.tensor_parallel / 1e9
    kv = 2 * a.layers * a.kv_heads * a.head_dim * 2 * s / n.vllm.tensor_parallel / 1e9
    generation = vllm_share + weights / 1e9 + OVERHEAD_GB / 2
    return {
        "stage": kind,
        "seq": s,
        "weights_gb": round(weights / 1e9, 1),
        "grads_gb": round(grads / 1e9, 1),
        "optimizer_gb": round(optimizer / 1e9, 1),
        "activations_gb": round((acts + logits) / 1e9, 1),
        "train_gb": round(train, 1),
        "vllm_weights_gb": round(vllm_weights, 1),
        "kv_gb": round(vllm_share - vllm_weights - kv, 1),  # left for more sequences' KV cache
        "generation_gb": round(generation, 1),
    }


def print_plan(cfg: ExperimentConfig, result: Plan) -> None:
    """Tables: the layout, memory per GPU per stage, and the refusals."""
    n, a = cfg.engine.nemo_rl, cfg.model.architecture
    assert n is not None and a is not None
    mg = n.megatron
    console = Console(width=160)
    console.print(
        f"{cfg.model.name_or_path} ({params(a)['total'] / 1e9:.1f}B parameters) on {n.cluster.num_nodes} x "
        f"{n.cluster.gpus_per_node} {n.cluster.gpu}: TP={mg.tensor_parallel} PP={mg.pipeline_parallel} "
        f"CP={mg.context_parallel} EP={mg.expert_parallel} DP={result.dp}, SP={mg.sequence_parallel}, "
        f"recompute={mg.activation_checkpointing}, distributed optimizer={mg.distributed_optimizer}, "
        f"vLLM TP={n.vllm.tensor_parallel} at {n.vllm.gpu_memory_utilization:.2f}"
    )
    table = Table(title=f"estimated memory per GPU (GB; GPU {GPU_MEMORY_GB[n.cluster.gpu]:.0f})")
    cols = ("stage", "seq", "weights_gb", "grads_gb", "optimizer_gb", "activations_gb", "train_gb",
            "generation_gb", "kv_gb")  # fmt: skip
    for col in cols:
        table.add_column(col.removesuffix("_gb"), justify="right")
    for row in result.memory:
        table.add_row(*(str(row[c]) for c in cols))
    console.print(table)
    ev = cfg.pipeline.eval
    n = planned_engines(cfg, engine_for(cfg).job_gpus(cfg))
    lanes = planned_lanes(cfg, n)
    console.print(
        f"data steps (pairs, selection, evaluation, baseline data): {engines_summary(cfg, n)} "
        f"(generation.engines={cfg.generation.engines}); {ev.workers} env workers x {ev.envs_per_worker} envs "
        f"(env.pool={cfg.env.pool}: Ray actors over the job's nodes), episodes in {lanes} lane{'s' * (lanes > 1)} "
        f"(env.lanes={cfg.env.lanes})"
    )
    for rule, reason in result.refusals:
        console.print(f"[red]refused[/] ({rule}): {reason}")
    console.print("[green]layout ok[/]" if result.ok else f"[red]{len(result.refusals)} rule(s) refuse this layout[/]")
