"""The data steps' vLLM settings, checked where our code decides them (no GPU or vLLM runs here; issue 43).

* Batch invariance is ``generation.vllm.batch_invariant``: ``VLLM_BATCH_INVARIANT`` in the engine actors' environment
  only, never the driver's (NeMo-RL copies the driver's ``os.environ`` into every training worker and rollout engine:
  ``nemo_rl/distributed/worker_groups.py:444-447``, v0.7.0). A value the user exported is read as vLLM 0.20.0 reads
  it (``vllm/envs.py:521``: ``bool(int(os.getenv("VLLM_BATCH_INVARIANT", "0")))``), and a training stage warns when
  it is set for the whole job.
* Two models that share one engine (a policy and its critic with ``generation.engines=1``) each get their share of
  ``gpu_memory_utilization``, checked against vLLM's own start-up rule (``request_memory`` below).

The engine actors' environment on a real Ray cluster: ``tests/test_ray_engines.py``.
"""

from __future__ import annotations

import math

import pytest

from nemo_act.config import load_config
from nemo_act.generation import engine_placement, needs_actor, open_generators
from nemo_act.generation.vllm import job_batch_invariant, job_batch_invariant_warning

GIB = 2**30


def vllm_reads(value: str) -> bool:
    """vLLM 0.20.0's own reading of the variable (``vllm/envs.py:521``), the expression as it stands there."""
    return bool(int(value))


@pytest.mark.parametrize("value", ["0", "1", "2", "00"])
def test_an_exported_value_is_read_as_vllm_reads_it(value):
    assert job_batch_invariant({"VLLM_BATCH_INVARIANT": value}) is vllm_reads(value)
    assert job_batch_invariant({}) is False


@pytest.mark.parametrize("value", ["true", "yes", ""])
def test_a_value_vllm_cannot_read_is_one_line_saying_what_to_set(value):
    """``true`` stops vLLM at its first read of the variable (``int('true')``); we say so before any engine starts."""
    with pytest.raises(ValueError) as vllm_error:
        vllm_reads(value)
    with pytest.raises(ValueError, match=r"vllm/envs\.py:521.*generation\.vllm\.batch_invariant=true") as ours:
        job_batch_invariant({"VLLM_BATCH_INVARIANT": value})
    assert "\n" not in str(ours.value) and type(vllm_error.value) is ValueError


def test_batch_invariance_is_an_engine_setting_not_a_job_variable():
    """Default off; on, it is in every vLLM engine's placement environment (``1``), and off it is ``0`` there, over
    whatever the job exported: the config decides for the data steps' engines. It never touches ``os.environ``."""
    import os

    off = load_config(overrides=["generation=vllm"]).generation
    on = load_config(overrides=["generation=vllm", "generation.vllm.batch_invariant=true"]).generation
    assert off.vllm.batch_invariant is False
    assert engine_placement(off).env["VLLM_BATCH_INVARIANT"] == "0"
    assert engine_placement(on).env["VLLM_BATCH_INVARIANT"] == "1"
    wide = load_config(overrides=["generation=vllm", "generation.vllm.batch_invariant=true",
                                  "generation.vllm.tensor_parallel=4"]).generation  # fmt: skip
    assert engine_placement(wide).env["VLLM_BATCH_INVARIANT"] == "1"  # its vLLM workers inherit the actor's env
    assert "VLLM_BATCH_INVARIANT" not in os.environ
    # one engine, batch invariant: in a Ray actor too, since an in-process engine would read the step's environment
    assert needs_actor(on) and not needs_actor(off) and not needs_actor(load_config().generation)


def test_a_training_stage_warns_when_it_is_set_for_the_whole_job():
    assert (
        job_batch_invariant_warning({}) is None and job_batch_invariant_warning({"VLLM_BATCH_INVARIANT": "0"}) is None
    )
    warning = job_batch_invariant_warning({"VLLM_BATCH_INVARIANT": "1"})
    assert warning.startswith("warning: VLLM_BATCH_INVARIANT=1 is set for the whole job")
    assert "generation.vllm.batch_invariant=true" in warning
    with pytest.raises(ValueError, match="vllm/envs.py:521"):
        job_batch_invariant_warning({"VLLM_BATCH_INVARIANT": "true"})


@pytest.mark.heavy
def test_the_pipeline_prints_the_warning_before_a_stage_trains(sw_experts, tiny_model_dir, tmp_path, monkeypatch):
    """A real IL stage of the local engine (2 steps on the tiny model) started with the variable exported."""
    from rich.console import Console

    from nemo_act.run.pipeline import PipelineRunner

    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")
    console = Console(record=True, width=300)
    cfg = load_config(overrides=["train=smoke", f"run_dir={tmp_path}", "benchmark.max_admissible_shown=8"])
    out = PipelineRunner(cfg, console=console).run_stage(0, "il", str(tiny_model_dir), {"experts": sw_experts})
    text = console.export_text()
    assert "00_il: warning: VLLM_BATCH_INVARIANT=1 is set for the whole job" in text
    assert (tmp_path / "stages" / "00_il" / "stage.json").is_file() and out.endswith("00_il")


def request_memory(total: int, free: int, utilization: float) -> int:
    """vLLM 0.20.0's start-up check of one engine (``vllm/v1/worker/utils.py:403-420``, called when the worker starts,
    ``gpu_worker.py:283``): it asks for ``ceil(total x gpu_memory_utilization)`` and refuses to start with less free.

    Raises:
        ValueError: As vLLM does ("Free memory on device ... is less than desired GPU memory utilization").
    """
    requested = math.ceil(total * utilization)
    if free < requested:
        raise ValueError(f"Free memory on device ({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup is less than "
                         f"desired GPU memory utilization ({utilization}, {requested / GIB:.2f} GiB)")  # fmt: skip
    return requested


def start_on_one_gpu(utilizations: list[float], total: int = 80 * GIB, in_use: int = GIB) -> None:
    """Start engines one after another on one GPU as vLLM would: each holds what it requested once started."""
    free = total - in_use  # the CUDA context and whatever else the node runs
    for u in utilizations:
        free -= request_memory(total, free, u)


class Recorded:
    """Stands in for ``VLLMGenerator`` (vLLM needs a GPU): records the settings each model's engine is built with."""

    built: list[tuple[str, float]] = []

    def __init__(self, model_cfg, gen_cfg, name_or_path=None):
        self.name = name_or_path
        Recorded.built.append((name_or_path, gen_cfg.vllm.gpu_memory_utilization))


def test_two_vllm_models_on_one_engine_each_get_their_share_of_the_gpu(monkeypatch):
    """SAND from round 2, Agent-R and ``nemo-act reflection --critic`` open a policy and its critic together; with one
    engine both run on the same GPU. At 0.85 each (the config's value) vLLM refuses the second; each gets 0.85 / 2."""
    import nemo_act.generation.vllm as vllm_backend

    monkeypatch.setattr(vllm_backend, "VLLMGenerator", Recorded)
    Recorded.built = []
    cfg = load_config(overrides=["generation=vllm", "generation.engines=1"])
    u = cfg.generation.vllm.gpu_memory_utilization
    with open_generators(cfg, "org/policy", "org/critic", "random"):
        pass
    assert Recorded.built == [("org/policy", u / 2), ("org/critic", u / 2)]
    start_on_one_gpu([share for _, share in Recorded.built])  # both start under vLLM's rule
    with pytest.raises(ValueError, match="less than desired GPU memory utilization"):
        start_on_one_gpu([u, u])  # what the step asked for before: the second engine stops

    Recorded.built = []
    with open_generators(cfg, "org/policy"):  # one model: the whole share, as configured
        pass
    assert Recorded.built == [("org/policy", u)]


def test_models_sharing_an_engine_in_ray_ask_for_their_fraction_of_each_gpu():
    """Batch invariance puts even one engine in a Ray actor: two models then ask Ray for half a GPU each (one GPU
    holds both), and a tensor-parallel engine's vLLM workers ask for the same fraction (``VLLM_RAY_PER_WORKER_GPUS``,
    read by vLLM 0.20.0's ``ray_executor.py:152,210``; vLLM refuses only bundles of more than one GPU)."""
    one = load_config(overrides=["generation=vllm", "generation.vllm.batch_invariant=true"]).generation
    placed = engine_placement(one, share=2)
    assert placed.bundles == ({"CPU": one.engine_cpus, "GPU": 0.5},) and placed.actor["GPU"] == 0.5
    tp2 = load_config(overrides=["generation=vllm", "generation.vllm.tensor_parallel=2"]).generation
    wide = engine_placement(tp2, share=2)
    assert [b["GPU"] for b in wide.bundles] == [0.5, 0.5] and wide.env["VLLM_RAY_PER_WORKER_GPUS"] == "0.5"
    assert "VLLM_RAY_PER_WORKER_GPUS" not in engine_placement(tp2).env
