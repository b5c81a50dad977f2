r"""Data steps on 1, 2, 4 and 8 engines of a local Ray cluster: items/s, ratio to one engine, overhead per item.

    .venv/bin/python bench/data_steps_scaling.py [--engines 1,2,4,8] [--latency 4] [--model]
        [--pairs-batch 10] [--eval-batch 1] [--steps 6] [--lanes 1,2] [--out runs/bench/data_steps_scaling]

Two data steps, each on the code path the cluster uses (nemo_act/generation/ray_pool.py: engines as Ray
actors in a placement group, batches on the fixed grid, answers merged in order):

* **pairs**: ``collect_pairs`` over the 149 states of the shipped traces example (no env), K=2, batches
  of ``--pairs-batch`` states;
* **instant**: the same rollout loop (``play_starts``: lanes, the env pool's worker processes, one call per
  step and lane) on 32 episodes of exactly ``--steps`` steps in envs that cost nothing (2 workers x 16),
  all live at once (4 per engine at 8 engines, as the 8B ALFWorld layout's 128 env slots on 16 engines):
  what our scheduling, merge and env-pool overhead allow when the env's own CPU is elsewhere (on the
  cluster, every node's cores);
* **evaluation**: ``evaluate_policy`` on ScienceWorld, 8 episodes (4 tasks x 2 variations) of at most
  ``--steps`` steps, real JVM envs in the env pool (2 workers x 4 envs), once per ``--lanes`` value
  (``env.lanes``: 1 = one batched call per env step across all live episodes, env steps between calls;
  2 = two lanes of 4 episodes, one lane's env steps while the other's call is in flight), each call cut
  into batches of ``--eval-batch``. The env workers (a JVM per env) are started and warmed with one reset
  each before the clock, as the engines are, and timed apart: one evaluation starts them once for all its
  seeds.

First with a **fixed-latency generator**: each call (one batch, as one ``LLM.generate`` call of a vLLM
engine) waits ``--latency`` seconds without using the CPU and answers a seeded admissible action, standing
for a GPU engine; this isolates our scheduling, merge and env-pool overhead (overhead per call = measured
time waiting for the engines minus the ideal ``calls x latency / engines``, rounded up to whole rounds; the
"generation s" column is the time the step waited for the engines, its lanes' calls overlapping counted
once; the rest of a step's seconds is envs and bookkeeping). 4 s is the order of one vLLM call that writes
a few hundred reasoning tokens for a batch on an 8B model. With one lane the evaluation's env work (resets
and ~0.13 s per ScienceWorld step, between calls) adds to every step; with two it hides behind the other
lane's call except at the start (the first lane's resets) and the end.
Then, with ``--model``, the **real tiny model** (HF on CPU: on 2 cores this is CPU-bound and
says what CPU contention gives, not what GPUs give). Engine start-up (actor processes, the model load) is
timed apart from the step. Figures go to ``<out>/scaling.json`` and a table; docs/performance.md keeps them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

from nemo_act.benchmarks.base import adapter_of
from nemo_act.common.seeding import key_rng
from nemo_act.config import load_config
from nemo_act.config.schema import SamplingConfig
from nemo_act.evaluation.rollout import Play, SharedEnvPool, Start, evaluate_policy, play_starts
from nemo_act.generation import BackendFactory, engine_placement
from nemo_act.generation.base import GenerationRequest
from nemo_act.generation.ray_pool import EnginePool
from nemo_act.generation.simple import wrap_action
from nemo_act.steps.pairs import collect_pairs

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "nemo_act" / "benchmarks" / "examples" / "travel_desk.jsonl"
SW_TASKS = ["lifespan-longest-lived", "find-non-living-thing", "find-animal", "find-plant"]
INSTANT_EPISODES = 32  # live at once: 4 per engine at 8 engines (the 8B ALFWorld layout: 128 env slots, 16 engines)


class LatencyGenerator:
    """A stand-in GPU engine: ``latency`` seconds per call (sleeping), a seeded admissible answer per request."""

    def __init__(self, latency: float) -> None:
        self.latency, self.name = latency, f"latency-{latency:g}s"

    def generate(self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int):
        """Sleep ``latency``, then answer ``n`` admissible actions per request."""
        time.sleep(self.latency)
        out = []
        for r in requests:
            rng = key_rng(seed, r.key)
            pool = sorted(r.admissible_actions) or ["look around"]
            out.append([wrap_action(rng.choice(pool)) for _ in range(n)])
        return out


class LatencyFactory:
    """Picklable factory of :class:`LatencyGenerator` (built inside each engine actor)."""

    def __init__(self, latency: float) -> None:
        self.latency, self.name = latency, f"latency-{latency:g}s"

    def __call__(self) -> LatencyGenerator:
        """One engine's generator."""
        return LatencyGenerator(self.latency)


class InstantEnv:
    """An env whose resets and steps cost nothing: episodes of exactly ``steps`` steps over 5 admissible actions.

    With it the evaluation rows measure the rollout loop itself (lanes, the env pool's processes and pipes, the
    engines' scheduling and merge), not the env's CPU, which on the cluster is spread over every node's cores.
    """

    def __init__(self, steps: int) -> None:
        self.steps, self.task, self.t = steps, "", 0

    def _view(self) -> dict:
        return {"observation": f"{self.task}: step {self.t}", "task_description": "reach the last step",
                "admissible": [f"go {d}" for d in ("north", "south", "east", "west", "up")],
                "score": 100.0 * self.t / self.steps, "done": self.t >= self.steps}  # fmt: skip

    def reset(self, task: str, variation: int) -> dict:
        """Begin an episode."""
        self.task, self.t = task, 0
        return self._view()

    def step(self, action: str) -> dict:
        """Any action moves one step on."""
        self.t += 1
        return self._view()

    def close(self) -> None:
        """Nothing to stop."""


class CountingPool:
    """An :class:`EnginePool` that counts requests and calls, and the time an ideal scheduler would take.

    Calls may come from several threads at once (evaluation lanes): the waiting time is the length of the
    union of the calls' intervals, and the ideal spreads all the step's batches over the engines in whole rounds.
    """

    def __init__(self, pool: EnginePool, latency: float | None) -> None:
        self.pool, self.name, self.latency = pool, pool.name, latency
        self.engines, self.split, self.concurrent_calls = pool.engines, pool.split, True
        self.requests = self.calls = 0
        self.intervals: list[tuple[float, float]] = []  # (start, end) of every call
        self._lock = threading.Lock()

    @property
    def ideal(self) -> float:
        """Seconds: the step's batches spread evenly over the engines in whole rounds, nothing else."""
        return math.ceil(self.calls / self.pool.engines) * (self.latency or 0.0)

    @property
    def gen_s(self) -> float:
        """Seconds the step spent waiting for the engines (overlapping calls counted once)."""
        total, end = 0.0, -math.inf
        for a, b in sorted(self.intervals):
            total, end = total + max(0.0, b - max(a, end)), max(end, b)
        return total

    def _count(self, requests: int, calls: int) -> None:
        with self._lock:
            self.requests, self.calls = self.requests + requests, self.calls + calls

    def generate(self, requests, n, sampling, seed):
        """Pass through, counting."""
        self._count(len(requests), math.ceil(len(requests) / self.pool.batch_size))
        t = time.perf_counter()
        try:
            return self.pool.generate(requests, n, sampling, seed)
        finally:
            with self._lock:
                self.intervals.append((t, time.perf_counter()))

    def generate_batches(self, batches, n, sampling, seed):
        """Pass through, counting."""
        batches = list(batches)
        self._count(sum(len(b) for b in batches), len(batches))
        t = time.perf_counter()
        for answers in self.pool.generate_batches(batches, n, sampling, seed):
            self.intervals.append((t, time.perf_counter()))
            yield answers
            t = time.perf_counter()


def run_step(step: str, factory, engines: int, cfg, work: Path, latency: float | None, experts: Path) -> dict:
    """Start ``engines`` engines (and the env workers), run one data step on them, and time the parts."""
    t0 = time.perf_counter()
    pool = EnginePool(factory, engines, cfg.generation.batch_size, engine_placement(cfg.generation),
                      cfg.generation.in_flight)  # fmt: skip
    startup = time.perf_counter() - t0
    gen = CountingPool(pool, latency)
    env_startup = None
    if step == "pairs":
        t1 = time.perf_counter()
        collect_pairs(experts, gen, cfg, work / f"pairs_{engines}.jsonl", k=2, progress=False)
    elif step == "evaluation":
        t = time.perf_counter()
        env_factory = adapter_of(cfg.benchmark).env_factory(cfg.benchmark, False)
        envs = SharedEnvPool(cfg, env_factory, 2, 4)
        pool_of_envs = envs.get()  # the workers build their envs (a JVM each) in the background: one reset each waits
        pool_of_envs.run({slot: ("reset", (SW_TASKS[0], 0)) for slot in range(pool_of_envs.size)})
        env_startup = time.perf_counter() - t
        t1 = time.perf_counter()
        with envs:
            evaluate_policy(gen, cfg, "test", work / f"eval_{engines}_{cfg.env.lanes}", tasks=SW_TASKS,
                            max_variations=2, seeds=[0], workers=2, envs_per_worker=4, progress=False,
                            env_pool=envs)  # fmt: skip
    else:  # the rollout loop alone: INSTANT_EPISODES episodes of instant envs, all live at once
        t = time.perf_counter()
        envs = SharedEnvPool(cfg, partial(InstantEnv, cfg.benchmark.max_steps), 2, INSTANT_EPISODES // 2)
        envs.get().run({slot: ("reset", ("warm", 0)) for slot in range(INSTANT_EPISODES)})
        env_startup = time.perf_counter() - t
        starts = [Start(f"instant/{i}/0", f"t{i}", 0, ("reset", (f"t{i}", 0))) for i in range(INSTANT_EPISODES)]
        t1 = time.perf_counter()
        with envs:
            play = Play(gen, cfg, 0, cfg.eval.sampling, 2, INSTANT_EPISODES // 2, progress=False, env_pool=envs)
            play_starts(play, starts, work / f"instant_{engines}_{cfg.env.lanes}.jsonl", None)
    seconds = time.perf_counter() - t1
    stats = pool.stats()
    pool.close()
    return {"step": step, "lanes": None if step == "pairs" else cfg.env.lanes, "engines": engines,
            "requests": gen.requests, "calls": gen.calls, "seconds": seconds, "generation_s": gen.gen_s,
            "ideal_s": gen.ideal if latency is not None else None, "startup_s": startup,
            "env_startup_s": env_startup, "requests_per_engine": stats["items"]}  # fmt: skip


def main() -> None:
    """Run the scaling table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="1,2,4,8")
    p.add_argument("--latency", type=float, default=4.0, help="seconds per call of the stand-in engine")
    p.add_argument("--pairs-batch", type=int, default=10, help="states per pairs call")
    p.add_argument("--eval-batch", type=int, default=1, help="episodes per evaluation call")
    p.add_argument("--steps", type=int, default=6, help="env steps per episode (benchmark.max_steps)")
    p.add_argument("--lanes", default="1,2", help="env.lanes values the evaluation runs with")
    p.add_argument("--model", action="store_true", help="also the real tiny model on CPU")
    p.add_argument("--only", choices=["pairs", "evaluation", "instant"], default=None, help="one step only")
    p.add_argument("--out", default=str(REPO / "runs" / "bench" / "data_steps_scaling"))
    args = p.parse_args()
    import ray

    counts = [int(x) for x in args.engines.split(",")]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ray.init(address="local", num_cpus=max(counts), include_dashboard=False, log_to_driver=False)
    work = Path(tempfile.mkdtemp(prefix="scaling-"))
    base = ["generation.device=cpu", "pairs.min_state_share=0", "pairs.sampling.max_new_tokens=16",
            "eval.sampling.max_new_tokens=16"]  # fmt: skip
    traces = load_config(overrides=[*base, "benchmark=traces", f"benchmark.path={TRACES}",
                                    f"generation.batch_size={args.pairs_batch}"])  # fmt: skip
    from nemo_act.benchmarks.traces import read_experts
    from nemo_act.data.io import write_jsonl

    experts = work / "experts.jsonl"
    write_jsonl(experts, read_experts(traces.benchmark, "train")[0])
    sw = [load_config(overrides=[*base, f"benchmark.max_steps={args.steps}", f"generation.batch_size={args.eval_batch}",
                                 f"env.lanes={lanes}"]) for lanes in args.lanes.split(",")]  # fmt: skip
    generators = [("fixed latency", LatencyFactory(args.latency), args.latency)]
    if args.model:
        from nemo_act.tiny_model import build_tiny_model

        tiny = build_tiny_model(work / "tiny", sw[0].model.tiny)
        generators.append(("tiny model (CPU)", BackendFactory(str(tiny), sw[0]), None))
    rows = []
    console = Console(width=160)
    for label, factory, latency in generators:
        for step, cfg in (("pairs", traces), *(("evaluation", c) for c in sw), *(("instant", c) for c in sw)):
            if args.only and step != args.only:
                continue
            for n in counts:
                folder = work / label.replace(" ", "_")
                r = run_step(step, factory, n, cfg, folder, latency, experts) | {"generator": label}
                rows.append(r)
                lanes = "" if r["lanes"] is None else f", {r['lanes']} lane(s)"
                env = "" if r["env_startup_s"] is None else f", env workers {r['env_startup_s']:.1f} s"
                console.print(f"{label} {step}{lanes} x{n}: {r['requests']} requests, {r['calls']} calls in "
                              f"{r['seconds']:.1f} s (start-up: engines {r['startup_s']:.1f} s{env}), per engine "
                              f"{r['requests_per_engine']}")  # fmt: skip
    table = Table(title=f"data steps on N engines (local Ray; fixed latency {args.latency:g} s per call)")
    cols = ("generator", "step", "lanes", "engines", "requests", "calls", "seconds", "requests/s", "x one engine",
            "/ engines", "generation s", "its x", "overhead ms/call")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="right")
    for r in rows:
        one = next(o for o in rows if o["generator"] == r["generator"] and o["step"] == r["step"]
                   and o["lanes"] == r["lanes"] and o["engines"] == 1)  # fmt: skip
        r["rate"] = r["requests"] / r["seconds"]
        r["ratio"] = r["rate"] / (one["requests"] / one["seconds"])
        ideal = r["ideal_s"]
        # our scheduling and merge: time waiting for the engines beyond the ideal (env time is not in it)
        r["overhead_ms_per_call"] = None if ideal is None else 1000 * (r["generation_s"] - ideal) / r["calls"]
        table.add_row(r["generator"], r["step"], "-" if r["lanes"] is None else str(r["lanes"]), str(r["engines"]),
                      str(r["requests"]), str(r["calls"]),
                      f"{r['seconds']:.1f}", f"{r['rate']:.2f}", f"{r['ratio']:.2f}",
                      f"{r['ratio'] / r['engines']:.2f}", f"{r['generation_s']:.1f}",
                      f"{one['generation_s'] / r['generation_s']:.2f}",
                      "-" if ideal is None else f"{r['overhead_ms_per_call']:.0f}")  # fmt: skip
    console.print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows},
                                                 indent=2) + "\n")  # fmt: skip
    console.print(f"figures: {out / 'scaling.json'}")
    ray.shutdown()


if __name__ == "__main__":
    main()
