"""What each recipe's generation engines ask Ray for, checked against the rules vLLM enforces on it.

No GPU or vLLM runs here: the placement is computed by our code (``generation.engine_placement``) from each
shipped recipe's generation layout and checked against vLLM 0.20.0's own rules (the version in NeMo-RL v0.7.0's
``uv.lock``), written out below with their lines. The placement itself, on a real Ray cluster with logical GPUs, is
``tests/test_ray_engines.py::test_an_engine_over_two_gpus_gets_one_bundle_per_gpu_worker``. Also: how a step's
engines are shared between two models (policy and critic).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from nemo_act.config import conf_root, load_config
from nemo_act.engines import engine_for
from nemo_act.generation import engine_placement, engine_shares, planned_engines
from nemo_act.generation.ray_pool import EnginePlacement

recipe_config = cache(load_config)
RECIPES = sorted(p for p in (conf_root() / "recipes").glob("*/*.yaml") if not p.parent.name.startswith("_"))


def vllm_refuses(placement: EnginePlacement, tensor_parallel: int) -> list[str]:
    """Why vLLM 0.20.0 would refuse this engine's placement (empty: it accepts it).

    * ``vllm/v1/executor/ray_utils.py:596-619`` (``initialize_ray_cluster``): inside a placement group (what
      ``ray.util.get_current_placement_group()`` returns in an actor scheduled in one) every bundle may hold at
      most one GPU ("Placement group bundle cannot have more than 1 GPU"), and there must be at least world-size
      bundles with a GPU;
    * ``vllm/v1/executor/ray_executor.py:177-188``: ``VLLM_RAY_BUNDLE_INDICES``, where set, names world-size
      distinct bundles, one per worker, each holding a GPU (a worker asks for ``num_gpus=1`` on its bundle);
    * ``vllm/config/parallel.py:794-839``: with world size > 1 inside a placement group vLLM picks the ``ray``
      executor, whose workers take those bundles' GPUs; the engine's own actor must not hold them too.
    """
    why = []
    gpu_bundles = [i for i, b in enumerate(placement.bundles) if b.get("GPU", 0)]
    if any(b.get("GPU", 0) > 1 for b in placement.bundles):
        why.append("a bundle holds more than 1 GPU")
    if tensor_parallel > 1:
        if len(gpu_bundles) < tensor_parallel:
            why.append(f"{len(gpu_bundles)} GPU bundles for world size {tensor_parallel}")
        indices = placement.env.get("VLLM_RAY_BUNDLE_INDICES")
        if indices is not None:
            named = [int(i) for i in indices.split(",")]
            if len(named) != tensor_parallel or len(set(named)) != len(named) or not set(named) <= set(gpu_bundles):
                why.append(f"VLLM_RAY_BUNDLE_INDICES={indices} does not name {tensor_parallel} distinct GPU bundles")
        if placement.actor.get("GPU", 0):
            why.append("the engine's actor holds GPUs that its workers need")
    return why


def test_the_rule_refuses_the_old_placement_of_an_engine_over_several_gpus():
    """One bundle of TP GPUs (what every engine got before) is what vLLM refuses; one GPU is fine."""
    assert "a bundle holds more than 1 GPU" in vllm_refuses(EnginePlacement.plain({"CPU": 1, "GPU": 4.0}), 4)
    assert vllm_refuses(EnginePlacement.plain({"CPU": 1, "GPU": 1.0}), 1) == []


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_recipes_engines_are_placed_as_vllm_accepts(recipe: Path):
    cfg = recipe_config(recipe)
    gen = cfg.generation
    assert gen.backend == "vllm" and gen.vllm is not None
    tp = gen.vllm.tensor_parallel
    placement = engine_placement(gen)
    assert vllm_refuses(placement, tp) == []
    assert placement.total()["GPU"] == tp  # an engine still holds TP GPUs, no more
    assert placement.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # NeMo-RL's vllm_worker.py:156
    caches = {placement.env_for(i)["VLLM_CACHE_ROOT"] for i in range(3)}
    assert len(caches) == 3  # one compile cache per engine (vllm_worker.py:115-119)
    engines = planned_engines(cfg, engine_for(cfg).job_gpus(cfg))
    shape = cfg.engine.nemo_rl.cluster
    assert engines * tp == shape.num_nodes * shape.gpus_per_node  # every GPU of the job, none twice


def test_the_shipped_recipes_include_engines_wider_than_one_gpu():
    """The check above is not vacuous: the 32B and 30B-A3B recipes' engines span several GPUs."""
    wide = {p.stem for p in RECIPES if recipe_config(p).generation.vllm.tensor_parallel > 1}
    assert any("32b" in s for s in wide) and any("30b-a3b" in s for s in wide)


@pytest.mark.parametrize(
    ("engines", "models", "shares"),
    [(16, 2, [8, 8]), (5, 2, [3, 2]), (8, 1, [8]), (1, 2, [1, 1]), (4, 0, [])],
)
def test_a_steps_engines_are_dealt_to_the_models_it_runs_at_once(engines, models, shares):
    got = engine_shares(engines, models)
    assert got == shares
    assert engines == 1 or sum(got) <= engines  # never more engines than the step has


def test_more_models_than_engines_is_refused_with_the_way_out():
    with pytest.raises(ValueError, match="runs 3 models at once .* at least that many, or 1"):
        engine_shares(2, 3)
