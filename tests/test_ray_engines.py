"""Data steps on a Ray cluster's engines and env workers: a real local Ray cluster, real actors.

Three CPU "engines" (the HF generator on the tiny model, each in its own Ray actor process,
nemo_act/generation/ray_pool.py) stand for three vLLM engines on GPUs: the pool, the placement group, the
sharding and the merge are the code that runs on the cluster; only the backend inside each actor differs.
What a user checks: every engine receives work, and the output is the one-engine output byte for byte for
the same seeds, also after the step is killed with SIGKILL and resumed. The env workers as Ray actors
(nemo_act/evaluation/ray_env_pool.py) keep the process pool's deadline and replay behaviour and play the
same episodes.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from nemo_act.config import load_config
from nemo_act.data.io import read_jsonl
from nemo_act.data.records import Trajectory
from nemo_act.generation import make_generator
from nemo_act.generation.hf import HFGenerator
from nemo_act.steps.pairs import collect_pairs, iter_states, sampling_request

ray = pytest.importorskip("ray", reason="Ray is the cluster extra (pip install -e '.[cluster]')")
import test_env_pool  # noqa: E402  (the process pool's stand-in envs; tests/ is on sys.path under pytest)

ray.cloudpickle.register_pickle_by_value(test_env_pool)  # its classes travel to the actors by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # and this module's (PlacementProbe)

pytestmark = pytest.mark.heavy
ENGINES = 3
SMALL = ["generation.batch_size=2", "pairs.sampling.max_new_tokens=12", "pairs.min_state_share=0", "pairs.k=2",
         "benchmark.max_admissible_shown=8"]  # fmt: skip


GPUS = 4  # logical: Ray places and hands them out (CUDA_VISIBLE_DEVICES ids), nothing computes on them


@pytest.fixture(scope="module")
def local_ray():
    """An isolated Ray cluster of this process: 3 logical CPUs (one per engine actor) and 4 logical GPUs."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=ENGINES, num_gpus=GPUS, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _cfg(engines: int):
    return load_config(overrides=[*SMALL, f"generation.engines={engines}", "generation.device=cpu"])


def _requests(experts, cfg, n):
    trajectories = list(read_jsonl(experts, Trajectory))
    return [sampling_request(t, i, cfg) for t, i in list(iter_states(trajectories))[:n]]


def test_every_engine_gets_work_and_answers_as_one_engine(local_ray, sw_experts, tiny_model_dir):
    one, three = _cfg(1), _cfg(ENGINES)
    requests = _requests(sw_experts, one, 11)  # 6 batches of 2 (the last one short)
    single = HFGenerator(one.model, one.generation, str(tiny_model_dir))
    pool = make_generator(str(tiny_model_dir), three)
    try:
        assert type(pool).__name__ == "EnginePool" and pool.name == str(tiny_model_dir)
        got = pool.generate(requests, 2, three.pairs.sampling, 7)
        assert got == single.generate(requests, 2, one.pairs.sampling, 7)
        stats = pool.stats()
        assert all(n > 0 for n in stats["items"]) and sum(stats["items"]) == len(requests), stats
        assert len({pid for _, pid in stats["where"]}) == ENGINES  # three processes, not one
        conts = [f"<action>{r.gold_action}</action>" for r in requests]
        assert pool.score(requests, conts) == single.score(requests, conts)
    finally:
        pool.close()
    deadline = time.time() + 30  # the engines' CPUs are free again (Ray returns them asynchronously)
    while ray.available_resources().get("CPU", 0) < ENGINES and time.time() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0) == ENGINES


@pytest.mark.repeat(
    "tests/test_ray_engines.py::test_every_engine_gets_work_and_answers_as_one_engine",
    "tests/test_pairs.py::test_killed_run_resumes_without_duplicates_or_gaps",
)
def test_pairs_on_three_engines_equal_one_engine_after_kill_and_resume(local_ray, sw_experts, tiny_model_dir, tmp_path):
    """`nemo-act pairs` with 3 engines is killed with SIGKILL mid-way (driver and actors go), re-run to the end,
    and its files equal a one-engine run's, byte for byte."""
    straight = tmp_path / "one.jsonl"
    collect_pairs(sw_experts, HFGenerator(_cfg(1).model, _cfg(1).generation, str(tiny_model_dir)), _cfg(1), straight,
                  progress=False)  # fmt: skip
    cli = [sys.executable, "-m", "nemo_act.cli", "pairs", "--experts", str(sw_experts), "--policy", str(tiny_model_dir)]
    args = [*SMALL, f"generation.engines={ENGINES}", "generation.device=cpu"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"OMP_NUM_THREADS": "1"}
    out = tmp_path / "three.jsonl"
    partial = out.with_name(out.name + ".states.jsonl.partial")
    proc = subprocess.Popen([*cli, "--out", str(out), *args], env=env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if partial.exists() and partial.read_text().count("\n") >= 2:  # the first batch (2 states) is written
            break
        time.sleep(0.01)  # the last batches can land within 0.1 s of each other: kill at the first one
    assert proc.poll() is None, proc.stderr.read()
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and the local Ray it started (its process group)
    proc.wait()
    n_states = sum(len(t.steps) for t in read_jsonl(sw_experts, Trajectory))
    assert not out.exists() and 0 < len(partial.read_text().splitlines()) < n_states
    done = subprocess.run([*cli, "--out", str(out), *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.read_text() == straight.read_text()
    states = out.with_name(out.name + ".states.jsonl")
    assert states.read_text() == straight.with_name(straight.name + ".states.jsonl").read_text()
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["counts"]["states"] == n_states


def test_ray_env_workers_replace_a_hung_worker_within_its_deadline(local_ray):
    from nemo_act.evaluation.ray_env_pool import RayEnvPool

    timeout = 3.0  # a real-time timer: under a loaded CI machine 1 s also ends calls that were merely descheduled
    with RayEnvPool(test_env_pool.SleepyEnv, workers=2, envs_per_worker=1, call_timeout=timeout) as pool:
        pool.run({0: ("reset", ("hang", 0)), 1: ("reset", ("ok", 0))})
        assert pool.pop_lost_slots() == {}  # both actors warm: what follows is the hung step alone
        start = time.monotonic()
        out = pool.run({0: ("step", ("wait",)), 1: ("step", ("wait",))})
        assert time.monotonic() - start < timeout + 10  # the deadline plus a small constant
        assert set(out) == {1} and out[1]["observation"] == "ok at 1"
        lost = pool.pop_lost_slots()
        assert set(lost) == {0} and "past its deadline" in lost[0]
        assert pool.run({0: ("reset", ("ok", 1))})[0]["observation"] == "ok at 0"  # the new worker works
        assert pool.restarts == 1
        assert len({pid for _, pid in pool.where()}) == 2


def test_a_ray_env_worker_whose_env_cannot_be_built_answers_with_why(local_ray):
    """The Ray actors build their envs as the worker processes do (``env_worker.build_envs``): the construction's
    error answers every call, no restart (``test_env_pool``'s test of the same on processes)."""
    from nemo_act.evaluation.ray_env_pool import RayEnvPool

    with RayEnvPool(test_env_pool.BrokenInstall, workers=1, envs_per_worker=1) as pool:
        results = list(pool.imap([(t, "play", (t,)) for t in ("a", "b")], 2))
        assert pool.restarts == 0
    assert [(k, status) for k, status, _ in results] == [("a", "error"), ("b", "error")]
    assert "building the env failed: OSError: [E050]" in results[0][2]


def test_ray_env_workers_play_what_worker_processes_play(local_ray, tmp_path):
    """The same episodes (one hangs for ever) on process workers and on Ray actors: the same records."""
    from functools import partial

    from tqdm import tqdm

    from nemo_act.data.io import ResumableJsonl
    from nemo_act.evaluation.pool import EnvPool
    from nemo_act.evaluation.ray_env_pool import RayEnvPool
    from nemo_act.evaluation.rollout import EpisodeRecord, Play, Scheduler, Start
    from nemo_act.generation import RandomGenerator

    cfg = load_config(overrides=["env.max_restarts=1"])
    records = {}
    for name, kind in (("process", EnvPool), ("ray", RayEnvPool)):
        queue = [Start(f"x/{t}/0", t, 0, ("reset", (t, 0))) for t in ("a", "hang", "b", "c")]
        log = ResumableJsonl(tmp_path / f"{name}.jsonl", EpisodeRecord, key="episode_id")
        with log, kind(partial(test_env_pool.SleepyEnv, "step"), 2, 2, 1.0) as pool, tqdm(disable=True) as bar:
            play = Play(RandomGenerator(), cfg, 0, cfg.eval.sampling, 2, 2)
            Scheduler(pool, play, list(queue), log, bar, log.out).run()
        records[name] = sorted((r.model_dump() for r in log.records), key=lambda r: r["episode_id"])
    assert records["ray"] == records["process"]
    hung = next(r for r in records["ray"] if r["task_id"] == "hang")
    assert "past its deadline" in hung["failed"] and sum(r["success"] for r in records["ray"]) >= 2


def test_a_backend_seeded_per_request_spreads_even_a_small_call_over_every_engine(local_ray):
    """vLLM seeds each request from its key (nemo_act/generation/vllm.py:request_seed), so the pool cuts a call
    into a piece per engine whatever generation.batch_size is (an env step's one call, an Early Experience
    chunk). The random policy seeds per request too: it stands in for vLLM here, answers compared exactly."""
    from nemo_act.generation import GenerationRequest, RandomGenerator
    from nemo_act.generation.ray_pool import EnginePool

    sampling = load_config().pairs.sampling
    actions = [f"go to room {j}" for j in range(30)]
    requests = [GenerationRequest(key=f"s{i}", messages=[], admissible_actions=actions) for i in range(7)]
    pool = EnginePool(RandomGenerator, ENGINES, 1024, {"CPU": 1}, 2, split="even")
    try:
        assert pool.generate(requests, 3, sampling, 5) == RandomGenerator().generate(requests, 3, sampling, 5)
        assert sorted(pool.stats()["items"]) == [2, 2, 3]  # 7 requests: one batch of 1024 for a single engine
        batches = [requests[:4], requests[4:]]
        streamed = list(pool.generate_batches(batches, 2, sampling, 9))
        assert streamed == [RandomGenerator().generate(b, 2, sampling, 9) for b in batches]
        assert pool.generate([], 1, sampling, 0) == []
    finally:
        pool.close()


def test_evaluation_on_three_engines_in_two_lanes_plays_what_one_engine_plays(local_ray, sw_fast_tasks, tmp_path):
    """ScienceWorld episodes (real JVM envs) with the policy on 3 engines that seed each request (the random policy
    standing for vLLM, as above): ``env.lanes: auto`` gives 2 lanes, every engine answers, and the episodes and
    summary files equal the one-engine, one-lane run's byte for byte."""
    from nemo_act.evaluation.rollout import evaluate_policy, lanes_for
    from nemo_act.generation import RandomGenerator
    from nemo_act.generation.ray_pool import EnginePool

    cfg = load_config(overrides=["benchmark.max_steps=3"])
    pool = EnginePool(RandomGenerator, ENGINES, 1024, {"CPU": 1}, 2, split="even")
    try:
        lanes = lanes_for(cfg.env.lanes, pool.engines, pool.split == "even")
        assert (lanes, lanes_for(cfg.env.lanes, 1, True), lanes_for(cfg.env.lanes, ENGINES, False)) == (2, 1, 1)
        runs = {}
        for name, policy in (("one", RandomGenerator()), ("three", pool)):
            out = tmp_path / name
            evaluate_policy(policy, cfg, "test", out, tasks=sw_fast_tasks, max_variations=2, seeds=[0, 1], workers=2,
                            envs_per_worker=2, progress=False)  # fmt: skip
            runs[name] = {p.relative_to(out): p.read_text() for p in sorted(out.rglob("seed_*/*.json*"))}
        assert all(n > 0 for n in pool.stats()["items"]), pool.stats()
    finally:
        pool.close()
    assert len(runs["one"]) == 4 and runs["three"] == runs["one"]


class _Worker:
    """A tensor-parallel worker as vLLM's Ray executor starts it: an actor with ``num_cpus=0, num_gpus=1`` on one
    bundle of the engine's placement group (vLLM 0.20.0 ``vllm/v1/executor/ray_executor.py:199-213``)."""

    def gpus(self) -> list:
        return ray.get_gpu_ids()


class PlacementProbe:
    """Built inside an engine's actor instead of vLLM's ``LLM``: reads what vLLM reads there (the current placement
    group, ``VLLM_RAY_BUNDLE_INDICES``, ``VLLM_RAY_PER_WORKER_GPUS``, the actor's GPUs), applies vLLM's bundle rule to
    that group (``ray_utils.py:603-619``), then starts the workers as vLLM 0.20.0's executor does (one per bundle
    index, each asking for ``VLLM_RAY_PER_WORKER_GPUS`` of its bundle: ``ray_executor.py:152,177-188,210``) and
    reports their GPUs, from which vLLM builds each worker's ``CUDA_VISIBLE_DEVICES`` (``ray_executor.py:276-322``)."""

    name = "probe"

    def __init__(self) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        pg = ray.util.get_current_placement_group()
        assert pg is not None and all(b.get("GPU", 0) <= 1 for b in pg.bundle_specs), pg.bundle_specs
        indices = [int(i) for i in os.environ["VLLM_RAY_BUNDLE_INDICES"].split(",")]
        per_worker = float(os.environ.get("VLLM_RAY_PER_WORKER_GPUS", "1"))  # ray_executor.py:152,210
        workers = [
            ray.remote(num_cpus=0, num_gpus=per_worker)(_Worker)
            .options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_capture_child_tasks=True, placement_group_bundle_index=i
                )
            )
            .remote()
            for i in indices
        ]
        self.seen = {
            "bundles": pg.bundle_specs, "indices": indices, "actor_gpus": ray.get_gpu_ids(),
            "worker_gpus": ray.get([w.gpus.remote() for w in workers], timeout=120),
            "env": {k: os.environ.get(k) for k in ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_CACHE_ROOT")},
        }  # fmt: skip

    def generate(self, requests, n, sampling, seed) -> list[list[str]]:
        return [[json.dumps(self.seen)] * n for _ in requests]


def test_an_engine_over_two_gpus_gets_one_bundle_per_gpu_worker(local_ray):
    """``generation=vllm`` with ``tensor_parallel=2`` on 4 GPUs: 2 engines, each a placement group that vLLM's rule
    accepts, its actor holding no GPU, its two workers placed on GPUs of their own; 4 different GPUs in all; every
    GPU free again as soon as ``close`` returns (it waits)."""
    from nemo_act.generation import GenerationRequest, engine_placement, resolve_engines
    from nemo_act.generation.ray_pool import EnginePool, live_pools

    cfg = load_config(overrides=["generation=vllm", "generation.vllm.tensor_parallel=2", "generation.engines=2"])
    assert resolve_engines(cfg.generation) == 2
    pool = EnginePool(PlacementProbe, 2, 1024, engine_placement(cfg.generation), 2, split="even")
    try:
        assert pool in live_pools() and ray.available_resources().get("GPU", 0) == 0
        requests = [GenerationRequest(key=f"s{i}", messages=[], admissible_actions=[]) for i in range(2)]
        seen = [json.loads(r[0]) for r in pool.generate(requests, 1, cfg.pairs.sampling, 0)]
    finally:
        pool.close()
    assert sorted(pool.stats()["items"]) == [1, 1]  # each engine answered one request: both reported
    for s in seen:
        assert [b.get("GPU") for b in s["bundles"]] == [1.0, 1.0] and s["indices"] == [0, 1]
        assert s["actor_gpus"] == [] and all(len(g) == 1 for g in s["worker_gpus"])
        assert s["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert len({g[0] for s in seen for g in s["worker_gpus"]}) == GPUS
    assert len({s["env"]["VLLM_CACHE_ROOT"] for s in seen}) == 2
    assert live_pools() == [] and ray.available_resources().get("GPU", 0) == GPUS  # no waiting here: close did


class ProbeFactory:
    """What ``BackendFactory`` builds in each engine's actor, standing in for vLLM: a :class:`PlacementProbe`."""

    def __init__(self, policy: str, cfg) -> None:
        self.policy = policy

    def __call__(self) -> PlacementProbe:
        return PlacementProbe()


def test_tensor_parallel_engines_of_two_models_on_shared_gpus_give_each_rank_a_gpu_of_its_own(local_ray, monkeypatch):
    """Issue 56: a policy and its critic on one engine (SAND, Agent-R: ``open_generators`` with one engine) in Ray
    (batch invariance), at ``tensor_parallel=2``: each model's engine was a placement group of two half-GPU bundles;
    Ray places fractional bundles best-fit, so both landed on one GPU and vLLM gave both ranks
    ``CUDA_VISIBLE_DEVICES=0,0``. Now the models share one group of whole GPUs, each worker at its half: the two
    ranks of each model on two different GPUs, the two models on the same two, every GPU back after the step."""
    import nemo_act.generation as generation
    from nemo_act.generation import GenerationRequest, open_generators
    from nemo_act.generation.ray_pool import live_pools

    monkeypatch.setattr(generation, "BackendFactory", ProbeFactory)
    cfg = load_config(overrides=["generation=vllm", "generation.vllm.tensor_parallel=2", "generation.engines=1",
                                 "generation.vllm.batch_invariant=true"])  # fmt: skip
    request = [GenerationRequest(key="s0", messages=[], admissible_actions=[])]
    with open_generators(cfg, "org/policy", "org/critic", "random") as (policy, critic, _random):
        seen = [json.loads(g.generate(request, 1, cfg.pairs.sampling, 0)[0][0]) for g in (policy, critic)]
        assert ray.available_resources().get("GPU", 0) == GPUS - 2  # one engine's two GPUs, shared
    for s in seen:
        assert len({g[0] for g in s["worker_gpus"]}) == 2, s["worker_gpus"]  # rank 0 and rank 1: two GPUs
        assert [b.get("GPU") for b in s["bundles"]] == [1.0, 1.0] and s["indices"] == [0, 1]
        assert s["actor_gpus"] == [] and all(len(g) == 1 for g in s["worker_gpus"])
    assert seen[0]["worker_gpus"] == seen[1]["worker_gpus"]  # the critic's ranks beside the policy's
    deadline = time.time() + 30
    while ray.available_resources().get("GPU", 0) < GPUS and time.time() < deadline:
        time.sleep(0.2)
    assert live_pools() == [] and ray.available_resources().get("GPU", 0) == GPUS


def test_a_second_pool_that_cannot_fit_stops_at_once_naming_the_first(local_ray):
    """Two pools that each want the whole cluster: the second is refused before any placement group is asked for
    (it would wait PLACEMENT_TIMEOUT_S for GPUs the first holds), naming the pool that holds them."""
    from nemo_act.generation import RandomGenerator
    from nemo_act.generation.ray_pool import EnginePool, PlacementError

    first = EnginePool(RandomGenerator, GPUS, 1024, {"CPU": 0.5, "GPU": 1}, 2, split="even")
    try:
        t = time.monotonic()
        with pytest.raises(PlacementError, match=r"GPU.*4 needed, 0 free of 4.*other engine pools.*random: 4 engines"):
            EnginePool(RandomGenerator, GPUS, 1024, {"CPU": 0.5, "GPU": 1}, 2, split="even")
        assert time.monotonic() - t < 30
    finally:
        first.close()


@pytest.mark.slow
def test_sand_round_two_runs_policy_and_critic_on_a_share_of_the_engines_each(
    local_ray, sw_experts, tiny_model_dir, tmp_path, monkeypatch
):
    """A SAND round whose policy is not the initial one (round 2: the last round's checkpoint samples, the frozen
    initial model critiques) on a step of 2 engines: two pools of one engine each (before: two pools of 2, the
    second never placed on this 3-CPU cluster), both closed and their CPUs free when the step returns."""
    import shutil

    import nemo_act.generation.ray_pool as ray_pool
    from nemo_act.run.pipeline import PipelineRunner

    made = []
    init = ray_pool.EnginePool.__init__

    def spy(self, factory, engines, *args, **kwargs):
        made.append((factory.policy, engines))
        init(self, factory, engines, *args, **kwargs)

    monkeypatch.setattr(ray_pool.EnginePool, "__init__", spy)
    round_one = tmp_path / "01_sand"  # stands for round 1's checkpoint: the same weights, another policy
    shutil.copytree(tiny_model_dir, round_one)
    trajs = sorted(read_jsonl(sw_experts, Trajectory), key=lambda t: len(t.steps))
    experts = tmp_path / "experts.jsonl"
    experts.write_text(trajs[0].model_dump_json() + "\n")
    cfg = load_config(overrides=[
        *SMALL, "generation.engines=2", "generation.device=cpu", f"pipeline.init={tiny_model_dir}",
        "sand.candidates=2", "sand.rollout_steps=1", "sand.critic_sampling.max_new_tokens=12",
        "pipeline.eval.workers=1",
    ])  # fmt: skip
    runner = PipelineRunner(cfg, tmp_path / "run")
    audit = runner.baseline_data("sand", experts, str(round_one), "02_sand")
    assert sorted(made) == sorted([(str(round_one), 1), (str(tiny_model_dir), 1)])
    assert audit.is_file() and len(audit.read_text().splitlines()) == len(trajs[0].steps)
    assert ray_pool.live_pools() == [] and ray.available_resources().get("CPU", 0) == ENGINES


class EnvProbe:
    """An engine that reports what its actor's environment says of the accelerators."""

    name = "env-probe"

    def generate(self, requests, n, sampling, seed) -> list[list[str]]:
        seen = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "ray_gpus": ray.get_gpu_ids()}
        return [[json.dumps(seen)] * n for _ in requests]


@pytest.mark.parametrize(("driver", "gpus"), [("1", 0), ("1,3", 1)])
def test_engine_actors_get_the_gpus_ray_gave_them_not_the_drivers(local_ray, monkeypatch, driver, gpus):
    """A driver started on a subset of a node's GPUs (an ``srun`` step: ``CUDA_VISIBLE_DEVICES=1``) hands its actors
    its environment (``actor_env``). Measured with Ray 2.60 here before ``actor_env`` dropped the variable: an actor
    that holds no GPU kept the driver's list ('1'), which is what a tensor-parallel vLLM engine's actor is
    (``num_gpus=0``, with ``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES``), and vLLM's Ray workers inherit that
    actor's ``runtime_env``; a one-GPU actor got Ray's GPU here (ray-project/ray#66400 reports Ray leaving a
    ``runtime_env`` value alone). Now no actor receives the driver's list, and an engine on one of Ray's (logical)
    GPUs sees the one Ray placed it on."""
    from nemo_act.generation import GenerationRequest
    from nemo_act.generation.ray_pool import EnginePool, accelerator_variables, actor_env

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", driver)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", driver)
    pool = EnginePool(EnvProbe, 2, 1024, {"CPU": 0.5, "GPU": gpus}, 1, split="even")
    try:
        requests = [GenerationRequest(key=f"s{i}", messages=[]) for i in range(2)]
        seen = [json.loads(r[0]) for r in pool.generate(requests, 1, load_config().pairs.sampling, 0)]
    finally:
        pool.close()
    for s in seen:
        assert s["CUDA_VISIBLE_DEVICES"] != driver
        if gpus:
            assert len(s["ray_gpus"]) == 1 and s["CUDA_VISIBLE_DEVICES"] == str(s["ray_gpus"][0])
        else:
            assert s["ray_gpus"] == [] and not s["CUDA_VISIBLE_DEVICES"]
    if gpus:
        assert len({s["CUDA_VISIBLE_DEVICES"] for s in seen}) == 2  # two engines, two GPUs
    assert {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"} <= accelerator_variables()  # Ray's own list
    assert not accelerator_variables() & set(actor_env())


SELECTION = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


class SelectionProbe(EnvProbe):
    """An engine that reports the accelerator variables of its actor's environment."""

    def generate(self, requests, n, sampling, seed) -> list[list[str]]:
        seen = {k: os.environ.get(k) for k in SELECTION} | {"ray_gpus": ray.get_gpu_ids()}
        return [[json.dumps(seen)] * n for _ in requests]


class SelectionEnv:
    """An env whose reset answers with the accelerator variables of its worker's environment."""

    def reset(self, task, seed):
        return {k: os.environ.get(k) for k in SELECTION}

    def close(self):
        pass


@pytest.mark.parametrize(
    "driver",
    [
        {"ROCR_VISIBLE_DEVICES": "0,1,2,3"},  # alone: Ray 2.55.1's AMD manager raises RuntimeError
        {"HIP_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "2,3"},  # lists that differ: it raises ValueError
        {"CUDA_VISIBLE_DEVICES": "1"},
    ],
    ids=["rocr-alone", "hip-and-cuda-differ", "cuda"],
)
def test_engine_and_env_pools_start_under_any_accelerator_variables_and_hand_none_on(local_ray, monkeypatch, driver):
    """Issue 56: ``accelerator_variables`` asked every accelerator manager of Ray for its variable and caught only
    ImportError and AttributeError, so a driver whose environment held ``ROCR_VISIBLE_DEVICES`` alone (as Slurm's
    gres.conf or a site's module may set it), or HIP and CUDA lists that differ, crashed every engine pool and env
    pool before an actor started (``RuntimeError: Please use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES``,
    ``ray/_private/accelerators/amd_gpu.py:42-58`` in Ray 2.55.1). A real engine pool on Ray's logical GPUs and a
    real env pool start under each, and no actor gets the driver's selection: an engine sees the GPU Ray gave it."""
    from nemo_act.evaluation.ray_env_pool import RayEnvPool
    from nemo_act.generation import GenerationRequest
    from nemo_act.generation.ray_pool import EnginePool

    for name in SELECTION:
        monkeypatch.delenv(name, raising=False)
    for name, value in driver.items():
        monkeypatch.setenv(name, value)
    pool = EnginePool(SelectionProbe, 2, 1024, {"CPU": 0.5, "GPU": 1}, 1, split="even")
    try:
        requests = [GenerationRequest(key=f"s{i}", messages=[]) for i in range(2)]
        engines = [json.loads(r[0]) for r in pool.generate(requests, 1, load_config().pairs.sampling, 0)]
    finally:
        pool.close()
    with RayEnvPool(SelectionEnv, workers=2, envs_per_worker=1) as envs:
        workers = list(envs.run({0: ("reset", ("t", 0)), 1: ("reset", ("t", 0))}).values())
    assert len(engines) == 2 and len(workers) == 2
    for seen in engines:
        (gpu,) = seen.pop("ray_gpus")
        assert seen["CUDA_VISIBLE_DEVICES"] == str(gpu) and seen["ROCR_VISIBLE_DEVICES"] is None
        assert seen["HIP_VISIBLE_DEVICES"] in (None, str(gpu))  # Ray's own, where it sets one; never the driver's
    assert len({seen["CUDA_VISIBLE_DEVICES"] for seen in engines}) == 2
    for seen in workers:  # env workers hold no GPU: no selection at all
        assert seen == dict.fromkeys(SELECTION), seen


def test_every_accelerator_manager_of_the_installed_ray_names_a_listed_variable(monkeypatch):
    """The list kept beside the Ray it was read from (``ray_pool.RAY_ACCELERATOR_VARIABLES``, Ray 2.55.1) holds the
    variable of every accelerator manager the installed Ray has, asked with no selection variable set."""
    from ray._private.accelerators import get_all_accelerator_managers

    from nemo_act.generation.ray_pool import RAY_ACCELERATOR_VARIABLES, accelerator_variables

    for name in RAY_ACCELERATOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    names = {m.get_visible_accelerator_ids_env_var() for m in get_all_accelerator_managers()} - {None}  # Apple's
    assert names <= set(RAY_ACCELERATOR_VARIABLES), names - set(RAY_ACCELERATOR_VARIABLES)
    assert accelerator_variables() == frozenset(RAY_ACCELERATOR_VARIABLES)


CHATTY = """
class Chatty:
    name = "chatty"

    def __init__(self):
        print("chatty engine loading", flush=True)

    def generate(self, batch, n, sampling, seed):
        print(f"chatty engine answers {len(batch)} request(s)", flush=True)
        return [["<action>look around</action>"] * n for _ in batch]


class Broken:
    name = "broken"

    def __init__(self):
        raise RuntimeError("no such model: org/missing")


class ChattyEnv:
    def __init__(self):
        print("chatty env built", flush=True)

    def close(self):
        pass
"""

DRIVER = """
import sys, time
from pathlib import Path
from chatty import Broken, Chatty, ChattyEnv
from nemo_act.config import load_config
from nemo_act.evaluation.ray_env_pool import RayEnvPool
from nemo_act.generation.base import GenerationRequest
from nemo_act.generation.ray_pool import EnginePool, EngineError

log = Path(sys.argv[1])
pool = EnginePool(Chatty, 2, 2, {"CPU": 0.5}, 1, split="even")
pool.generate([GenerationRequest(key=f"k{i}", messages=[]) for i in range(4)], 1, load_config().pairs.sampling, 0)
pool.close()
try:
    EnginePool(Broken, 1, 2, {"CPU": 0.5}, 1)
except EngineError as err:
    print(f"driver: {err}", flush=True)
envs = RayEnvPool(ChattyEnv, 1, 1)
deadline = time.time() + 60  # Ray's log monitor forwards actors' lines within a second or so
while time.time() < deadline and "chatty env built" not in log.read_text():
    time.sleep(0.2)
envs.close()
"""


def test_engine_and_env_actor_output_reaches_the_drivers_log(tmp_path):
    """What engines and env workers print, and the traceback of an engine that cannot be built, reach the driver's
    output (on a Slurm job, ``pipeline.log``), each line under the actor's label and node, with no colour codes in a
    file; the driver raises one line naming the failure. Before, Ray ran with ``log_to_driver=False`` and all of it
    stayed in Ray's session folder on the actor's node. A real driver process with its stdout in a file, a local Ray
    cluster of its own (:func:`nemo_act.generation.ray_pool.connect`), real actors."""
    import socket

    (tmp_path / "chatty.py").write_text(CHATTY)
    (tmp_path / "driver.py").write_text(DRIVER)
    log = tmp_path / "pipeline.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)
    with log.open("w") as out:
        res = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(log)], stdout=out,
                             stderr=subprocess.STDOUT, env=env, timeout=300)  # fmt: skip
    text = log.read_text()
    assert res.returncode == 0, text[-3000:]
    node = socket.gethostname()
    lines = text.splitlines()
    assert any(line.startswith(f"(engine 0 on {node} pid=") and "chatty engine loading" in line for line in lines)
    assert any(line.startswith(f"(engine 1 on {node} pid=") and "chatty engine answers 2" in line for line in lines)
    assert any(line.startswith(f"(env worker 0 on {node} pid=") and "chatty env built" in line for line in lines)
    broken = [line for line in lines if "no such model: org/missing" in line]
    assert any(line.startswith(f"(engine 0 on {node} pid=") and "RuntimeError" in line for line in broken), broken
    assert "driver: a generation engine of broken could not be built: RuntimeError: no such model: org/missing" in text
    assert "\x1b[" not in text  # no colour codes in a file
