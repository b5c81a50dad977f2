"""Policy evaluation in a real benchmark env: batched generation across live episodes, env workers.

Each step, the prompts of all live episodes go to the policy in one ``generate`` call (the
action-generation prompt with history window k and the bounded admissible subset, nothing forced
in); the parsed actions go to the env pool, whose workers step their envs in parallel. With
``env.lanes`` > 1 the live episodes are dealt to lanes that do this in turn: one lane's envs step
while the other lanes' calls are in flight (:func:`lanes_for`). An episode
ends when the env says done or after ``benchmark.max_steps`` steps. Each finished episode is
appended to ``episodes.jsonl`` with every step (prompt, raw output, parsed action, reward, score),
so an interrupted evaluation resumes; ``summary.json`` holds the protocol metrics.

Metrics (the paper's protocol, docs/method.md): ``score`` is the mean over episodes of the highest score reached (0-100,
negative scores count as 0) and ``completion`` the share of episodes that reached 100. ScienceWorld
reports both; ALFWorld scores 100 for a won game, so its success rate is ``completion`` (= ``score``);
WebShop's reward (0-1) is scaled to 0-100, so ``score`` is the mean reward and ``completion`` the
success rate (reward 1).

A worker that dies or whose env call runs past ``env.call_timeout_s`` is replaced by the pool and its
episodes start again from their first step; an episode lost more than ``env.max_restarts`` times is
recorded as failed with the reason (score 0, counted in ``failed``) and the evaluation goes on; an evaluation
whose every episode failed stops with the reason instead of scoring 0 (:func:`refuse_all_failed`).
Policies are seeded from the run seed and the request keys (episode, step), so a rerun repeats.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from tqdm import tqdm

from nemo_act.benchmarks.base import Observation, adapter_of, as_observation
from nemo_act.config.schema import ExperimentConfig, SamplingConfig
from nemo_act.data.io import ResumableJsonl, append_json_line, read_jsonl, write_text_atomic
from nemo_act.data.records import Trajectory
from nemo_act.evaluation.env_pools import make_env_pool
from nemo_act.evaluation.pool import EnvPool
from nemo_act.evaluation.stats import mean_std, proportion
from nemo_act.generation import seeded_per_request
from nemo_act.generation.base import GenerationRequest, Generator, seeds_each_request
from nemo_act.prompts.render import as_messages, generation_prompt
from nemo_act.prompts.state import build_state, expert_action
from nemo_act.rewards import parse_action


class EpisodeRecord(BaseModel):
    """One evaluated episode (a line of ``episodes.jsonl``)."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    task_id: str
    variation: int
    seed: int
    steps: list[dict[str, Any]]
    max_score: float
    final_score: float
    success: bool
    failed: str | None = None  # why the episode could not be played (its env kept hanging or dying)


def replays_path(out: str | Path) -> Path:
    """Where the episodes of ``out`` (``.../episodes.jsonl``) note each replay: ``.../episodes.replays.jsonl``.

    One line per episode started again on a new env worker (``episode_id``, ``reason``), appended when it happens.
    Kept out of the episode records so that a replayed episode's record is the one an unbroken run writes.
    """
    out = Path(out)
    return out.with_name(out.name.split(".")[0] + ".replays.jsonl")


def count_replays(out: str | Path) -> int:
    """How many replays the episodes of ``out`` needed (lines of :func:`replays_path`; 0 when it is absent)."""
    path = replays_path(out)
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip()) if path.exists() else 0


@dataclass(frozen=True)
class Start:
    """How one episode begins: a reset, or a branch from a recorded state (SAND's roll-on).

    Attributes:
        key: The episode's id (records, resume, seeding).
        task: Its task.
        variation: Its variation.
        call: The env call that begins it: ``("reset", (task, variation))``, or a method of
            :class:`~nemo_act.steps.branching.BranchingEnv` that restores a state and executes a first action
            (it returns the observation after that action, or a string saying why it could not).
        past: (observation, action) pairs before the first step the policy plays (the replayed prefix and
            the branched action), shown in the policy's history.
        first: The step records the call already took (the branched action), completed from its result.
        max_steps: Step budget counted from the episode's start, prefix included.
    """

    key: str
    task: str
    variation: int
    call: tuple[str, tuple]
    past: tuple[tuple[str, str], ...] = ()
    first: tuple[dict[str, Any], ...] = ()
    max_steps: int | None = None


@dataclass
class _Live:
    start: Start
    view: Observation
    past: list[tuple[str, str]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    max_score: float = 0.0


def _env_factory(cfg: ExperimentConfig, expert: bool):
    factory = adapter_of(cfg.benchmark).env_factory(cfg.benchmark, expert)
    if factory is None:
        raise ValueError(f"benchmark '{cfg.benchmark.name}' has no live env to evaluate in (it is file-based)")
    return factory


class SharedEnvPool:
    """Env workers started when first needed and kept for the next episodes (the seeds of an evaluation).

    Args:
        cfg: Experiment config (``env``: pool kind and call deadline).
        factory: Builds one env in a worker.
        workers: Env worker processes (at most).
        envs_per_worker: Envs per worker (at most).
        episodes: How many episodes it will play, if known: fewer workers and envs are started when these
            fill them (the slots the episodes take, and so what they play, are the same).
    """

    def __init__(
        self, cfg: ExperimentConfig, factory: Any, workers: int, envs_per_worker: int, episodes: int | None = None
    ) -> None:
        if episodes:  # no more envs than episodes to play at once (a JVM each on ScienceWorld)
            envs_per_worker = min(envs_per_worker, episodes)
            workers = min(workers, -(-episodes // envs_per_worker))
        self._args = (cfg.env.pool, factory, workers, envs_per_worker, cfg.env.call_timeout_s)
        self._pool: EnvPool | None = None

    def get(self) -> EnvPool:
        """The workers, started at the first call (a JVM per env on ScienceWorld)."""
        if self._pool is None:
            self._pool = make_env_pool(*self._args)
        return self._pool

    def close(self, abort: bool = False) -> None:
        """Stop the workers, if they were started (``abort``: at once, see :meth:`EnvPool.close`)."""
        if self._pool is not None:
            self._pool.close(abort)
            self._pool = None

    def __enter__(self) -> SharedEnvPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(abort=exc_type is not None)


@dataclass(frozen=True)
class Play:
    """How episodes are played: one value for what every episode of a step shares.

    Attributes:
        generator: The policy (HF checkpoint, ``random``, ``gold``, an engine pool).
        cfg: Experiment config (benchmark, prompt, env).
        seed: Sampling seed.
        sampling: Temperature, top-p, max new tokens.
        workers: Env worker processes.
        envs_per_worker: Envs per worker (live episodes = workers * envs_per_worker).
        gold: Expert trajectories by episode id (for the gold policy).
        progress: Show a progress bar with the live completion rate.
        desc: The progress bar's label.
        env_pool: Env workers to play on (left running); None: started when there is something to play,
            stopped after.
    """

    generator: Generator
    cfg: ExperimentConfig
    seed: int
    sampling: SamplingConfig
    workers: int
    envs_per_worker: int
    gold: dict[str, Trajectory] | None = None
    progress: bool = True
    desc: str = "episodes"
    env_pool: SharedEnvPool | None = None

    @property
    def seeded_per_request(self) -> bool:
        """Whether the policy samples a request the same in any call (the one place this is decided for a step).

        It decides both how many lanes ``env.lanes: auto`` gives and whether a lane's live episodes may share a
        generate call (else one request per call, unless ``env.batch_episodes``).
        """
        return seeds_each_request(self.generator)


def episode_id(benchmark: str, task: str, variation: int) -> str:
    """Id of an evaluation episode (same form as the expert trajectory ids)."""
    return f"{benchmark}/{task}/{variation}"


def run_episodes(play: Play, episodes: Sequence[tuple[str, int]], out_dir: str | Path) -> dict[str, Any]:
    """Play episodes from their reset and write ``episodes.jsonl`` and ``summary.json`` in ``out_dir``.

    Args:
        play: The policy, its seed and sampling, the env workers.
        episodes: (task, variation) pairs.
        out_dir: Folder for this seed's results (resumes an interrupted run there).

    Returns:
        The summary.
    """
    out_dir = Path(out_dir)
    name = play.cfg.benchmark.name
    starts = [Start(episode_id(name, t, v), t, v, ("reset", (t, v))) for t, v in episodes]
    factory = _env_factory(play.cfg, expert=play.generator.name == "gold")
    records = play_starts(play, starts, out_dir / "episodes.jsonl", factory)
    refuse_all_failed(records, out_dir / "episodes.jsonl")
    summary = summarize(records, play.seed, count_replays(out_dir / "episodes.jsonl"))
    write_text_atomic(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def refuse_all_failed(records: Sequence[EpisodeRecord], out: Path) -> None:
    """Stop an evaluation none of whose episodes could be played, instead of scoring it 0.

    One lost episode is the env's (recorded as failed, score 0, and the evaluation goes on); every one of them lost
    is the machine's or the install's (env workers that die at start, say), and a summary would report it as the
    policy's 0%. The records and replay notes are moved aside (``*.failed.jsonl``), so a rerun plays every episode.

    Raises:
        RuntimeError: Every episode failed (the message names the folder, the count and the first reason).
    """
    if not records or not all(r.failed for r in records):
        return
    stem = out.name.split(".")[0]
    aside = out.with_name(f"{stem}.failed.jsonl")
    out.replace(aside)
    if replays_path(out).exists():
        replays_path(out).replace(out.with_name(f"{stem}.failed.replays.jsonl"))
    raise RuntimeError(
        f"{out.parent}: every one of the {len(records)} episodes failed ({records[0].failed}); nothing is scored "
        f"(the records are in {aside.name}); run again once the env workers start"
    )


def play_starts(play: Play, starts: Sequence[Start], out: str | Path, factory: Any) -> list[EpisodeRecord]:
    """Play episodes from their starts to the end with a policy; append each finished one to ``out`` (resumable).

    Args:
        play: The policy, its seed and sampling, the env workers (``play.env_pool``'s are built by ``factory``).
        starts: How each episode begins (a reset, or a branch from a recorded state).
        out: JSONL of :class:`EpisodeRecord` (``<out>.partial`` until every episode is done).
        factory: Builds one env in a worker (must have the methods the starts call).

    Returns:
        Every episode's record, in the order of ``starts`` (also their order in ``out``).
    """
    with ResumableJsonl(out, EpisodeRecord, key="episode_id") as log:
        done_ids = log.done_keys
        queue = [s for s in starts if s.key not in done_ids]
        bar = tqdm(total=len(starts), initial=len(starts) - len(queue), desc=play.desc, disable=not play.progress)
        with bar, contextlib.ExitStack() as stack:
            if queue:
                env_pool = play.env_pool or stack.enter_context(
                    SharedEnvPool(play.cfg, factory, play.workers, play.envs_per_worker, len(queue))
                )
                Scheduler(env_pool.get(), play, queue, log, bar, Path(out)).run()
        keys = [s.key for s in starts]
        log.finish(order=keys)  # lanes finish episodes in an order that depends on timing: the file does not
    return log.ordered(keys)


class Phase(Enum):
    """Where a lane is: what :class:`Scheduler` does with it next."""

    STARTING = "starting"  # its next episodes are being reset in its free env slots
    ASKING = "asking"  # its live episodes' generate call is in flight
    STEPPING = "stepping"  # the call came back: its actions run in the envs
    DONE = "done"  # nothing live, nothing queued


@dataclass
class _Lane:
    """A share of the env slots with its own episode queue, played in lockstep (one generate call per step)."""

    slots: list[int]
    queue: list[Start]
    live: dict[int, _Live] = field(default_factory=dict)
    free: list[int] = field(default_factory=list)
    starting: dict[int, Start] = field(default_factory=dict)
    call: tuple[list[int], list[GenerationRequest]] | None = None  # the slots and requests of its call in flight
    future: Future | None = None
    phase: Phase = Phase.STARTING


def lanes_for(setting: int | Literal["auto"], engines: int, seeded_per_request: bool) -> int:
    """How many lanes ``env.lanes`` gives.

    Args:
        setting: ``env.lanes``.
        engines: The policy's engines (an :class:`~nemo_act.generation.ray_pool.EnginePool`'s, else 1).
        seeded_per_request: Whether the policy seeds each request from its own key (vLLM), so a request samples
            the same whatever call it travels in.

    ``auto``: 2 on several engines seeded per request (the lanes' calls keep every engine busy and sample what
    one call would); 1 otherwise (one engine: splitting a step's batch only adds calls; the HF backend seeds
    per batch, so lanes would change its samples).
    """
    if setting != "auto":
        return setting
    return 2 if engines > 1 and seeded_per_request else 1


def planned_lanes(cfg: ExperimentConfig, engines: int) -> int:
    """The lanes an env-bound step of ``cfg`` will play in on ``engines`` engines (plans, the dry run)."""
    return lanes_for(cfg.env.lanes, engines, seeded_per_request(cfg.generation))


class Scheduler:
    """Plays queued episodes to the end on an env pool and a policy, appending each finished one to a log.

    The env slots and the episodes are dealt to ``env.lanes`` lanes (slot ``s`` and the ``i``-th queued episode
    to lane ``s % n`` and ``i % n``). Each lane plays its episodes in lockstep through the phases of :class:`Phase`:
    STARTING (reset its next episodes in its free slots), ASKING (one generate call for all its live episodes),
    STEPPING (their env steps, then STARTING again), DONE. While one lane's envs step here, the other lanes' calls
    run in threads, so env time overlaps generation; with one lane, env steps run between calls. What a lane asks
    the policy never depends on the other lanes' timing, so a policy seeded per request samples the same whatever
    the lane count, and any policy samples the same on every rerun.

    An episode whose env was lost with a dead or hung worker starts again from its first step (at most
    ``env.max_restarts`` times, then it is recorded as failed); the new worker gets fresh envs; each replay is noted
    in :func:`replays_path` of ``out``.

    A policy that does not seed each request on its own (the HF backend: one seed per batch) is asked one request
    per call unless ``env.batch_episodes``: an episode's samples then depend on its own requests only, never on
    which episodes are live beside it, so a replayed or resumed episode plays what an unbroken run plays.
    """

    def __init__(
        self, pool: EnvPool, play: Play, queue: list[Start], log: ResumableJsonl, bar: tqdm, out: Path
    ) -> None:
        cfg = play.cfg
        self.pool, self.cfg, self.seed, self.sampling, self.gold = pool, cfg, play.seed, play.sampling, play.gold
        self.log, self.bar, self.out = log, bar, out
        engines = getattr(play.generator, "engines", 1)  # an EnginePool's
        n = max(1, min(lanes_for(cfg.env.lanes, engines, play.seeded_per_request), pool.size, len(queue)))
        self.lanes = [_Lane(slots=[s for s in range(pool.size) if s % n == i], queue=queue[i::n]) for i in range(n)]
        for lane in self.lanes:
            lane.free = lane.slots[: len(lane.queue)]  # popped from the end (one lane: the slots as before lanes)
        self.lane_of = {s: lane for lane in self.lanes for s in lane.slots}
        self.replays: dict[str, int] = {}  # episode -> times it was started again (in this invocation)
        self.policy = _serialized(play.generator)
        if not (cfg.env.batch_episodes or play.seeded_per_request):
            self.policy = _one_request_per_call(self.policy)

    def run(self) -> None:
        """Play every queued episode to the end."""
        n = len(self.lanes)
        executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="nemo-act-lane") if n > 1 else None
        try:
            for lane in self.lanes:
                self._advance(lane, executor)
            while busy := [lane for lane in self.lanes if lane.phase is Phase.ASKING]:
                wait([lane.future for lane in busy], return_when=FIRST_COMPLETED)
                for lane in busy:  # in lane order: what a lane does next never depends on which call came back first
                    if lane.future.done():
                        self._step(lane, lane.future.result())
                        self._advance(lane, executor)
        finally:
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)

    def _advance(self, lane: _Lane, executor: ThreadPoolExecutor | None) -> None:
        """STARTING, then ASKING when an episode is live, else DONE."""
        self._start(lane)
        if lane.live:
            self._ask(lane, executor)
        else:
            lane.phase = Phase.DONE

    def _requeue_lost(self) -> None:
        """Episodes whose worker died or hung start again from their first step (or fail past the restarts)."""
        for s, reason in sorted(self.pool.pop_lost_slots().items()):
            lane = self.lane_of[s]
            if s not in lane.live and s not in lane.starting:
                continue  # an idle slot: nothing was lost
            ep = lane.live.pop(s).start if s in lane.live else lane.starting[s]
            self.replays[ep.key] = self.replays.get(ep.key, 0) + 1
            lane.free.append(s)
            k = self.replays[ep.key]
            if k > self.cfg.env.max_restarts:
                self.log.append([_failed(ep, self.seed, f"{reason} ({k} times)")])
                self.bar.update(1)
                self.bar.write(f"[nemo-act] episode {ep.key} failed: {reason} ({k} times)")
            else:
                append_json_line(replays_path(self.out), {"episode_id": ep.key, "reason": reason})
                lane.queue.insert(0, ep)
                self.bar.write(f"[nemo-act] env worker replaced ({reason}); episode {ep.key} starts again")

    def _finish(self, lane: _Lane, slot: int) -> None:
        ep = lane.live.pop(slot)
        self.log.append([_record(ep, self.seed)])
        lane.free.append(slot)
        self.bar.update(1)
        self.bar.set_postfix(success=f"{sum(r.success for r in self.log.records)}/{len(self.log.records)}")

    def _start(self, lane: _Lane) -> None:
        """STARTING: begin the lane's next episodes in its free slots, until one is live or its queue is empty.

        One round fills every free slot and begins those episodes (beside those still live). A round can leave
        nothing live (each start failed, ended at once, or lost its worker: their slots are free again, a lost
        one's episode queued again), and a lane with nothing live asks no call: then another round starts, while
        slots and episodes are left.
        """
        lane.phase = Phase.STARTING
        while lane.free and lane.queue:
            self._start_round(lane)
            if lane.live:  # the usual case: one round
                return

    def _start_round(self, lane: _Lane) -> None:
        """Deal the lane's next episodes to its free slots and begin them (:meth:`_start`'s one round)."""
        while lane.free and lane.queue:
            slot, ep = lane.free.pop(), lane.queue.pop(0)
            lane.starting[slot] = ep
        # in slot order, not in the order workers answered: which slot frees first decides where the next
        # episode goes, and so its place in a batched call (env.batch_episodes), so a rerun repeats
        for slot, view in sorted(self.pool.run({s: ep.call for s, ep in lane.starting.items()}).items()):
            ep = lane.starting[slot]
            if isinstance(view, str):  # a branch that could not be restored: recorded, not retried
                self.log.append([_failed(ep, self.seed, view)])
                lane.free.append(slot)
                self.bar.update(1)
                continue
            steps = [dict(s) for s in ep.first]
            live = lane.live[slot] = _Live(start=ep, view=as_observation(view), past=list(ep.past), steps=steps)
            if ep.first:  # the branched action's own step, completed from what the env showed
                live.steps[-1].update(score=live.view.score, observation=live.view.observation)
                live.max_score = live.view.score
                if _ended(live, self.cfg):
                    self._finish(lane, slot)
        self._requeue_lost()
        lane.starting = {}

    def _ask(self, lane: _Lane, executor: ThreadPoolExecutor | None) -> None:
        """ASKING: send the lane's live episodes to the policy (in a thread when there are several lanes)."""
        lane.phase = Phase.ASKING
        slots = sorted(lane.live)
        requests = [_request(lane.live[s], self.cfg, self.gold) for s in slots]
        lane.call = (slots, requests)
        if executor is None:
            lane.future = Future()
            lane.future.set_result(self.policy(requests, 1, self.sampling, self.seed))
        else:
            lane.future = executor.submit(self.policy, requests, 1, self.sampling, self.seed)

    def _step(self, lane: _Lane, responses: list[list[str]]) -> None:
        """STEPPING: execute the lane's parsed actions in its envs (slots lost meanwhile start again)."""
        lane.phase = Phase.STEPPING
        assert lane.call is not None
        calls = {}
        for s, req, (text,) in zip(*lane.call, responses, strict=True):
            if s not in lane.live:
                continue
            parsed = parse_action(text)
            action = parsed.action or ""
            lane.live[s].steps.append(
                {"prompt": req.messages[-1]["content"], "output": text, "action": action,
                 "well_formed": parsed.well_formed}
            )  # fmt: skip
            calls[s] = ("step", (action,))
        lane.call = lane.future = None
        results = self.pool.run(calls)
        self._requeue_lost()
        for s, view in sorted(results.items()):  # slot order, as in _start
            if s not in lane.live:
                continue
            ep = lane.live[s]
            view = as_observation(view)
            prev = ep.view.score
            ep.past.append((ep.view.observation, ep.steps[-1]["action"]))
            ep.steps[-1].update(reward=view.score - prev, score=view.score, observation=view.observation)
            ep.view = view
            ep.max_score = max(ep.max_score, view.score)
            if _ended(ep, self.cfg):
                self._finish(lane, s)


def _one_request_per_call(policy: Any):
    """``policy`` asked for each request alone (seeded by that request's key), answers in request order."""

    def generate(requests, n, sampling, seed):
        return [policy([r], n, sampling, seed)[0] for r in requests]

    return generate


def _serialized(generator: Generator):
    """``generator.generate``, one call at a time unless the generator takes concurrent calls (an engine pool)."""
    if getattr(generator, "concurrent_calls", False):
        return generator.generate
    lock = threading.Lock()

    def generate(requests, n, sampling, seed):
        with lock:
            return generator.generate(requests, n, sampling, seed)

    return generate


def _ended(ep: _Live, cfg: ExperimentConfig) -> bool:
    """The env said done, or the episode used its step budget (counted from its start, a replayed prefix too)."""
    return ep.view.done or len(ep.past) >= (ep.start.max_steps or cfg.benchmark.max_steps)


def _request(ep: _Live, cfg: ExperimentConfig, gold: dict[str, Trajectory] | None) -> GenerationRequest:
    view = ep.view
    eid = ep.start.key
    state = build_state(
        view.task_description,
        ep.past,
        view.observation,
        view.admissible,
        cfg.prompt.history_k,
        cfg.benchmark.max_admissible_shown,
        key=f"{eid}/{len(ep.past)}",
    )
    gold_action = view.expert_action  # the env's own expert (ALFWorld's handcoded one), live
    if gold is not None and eid in gold and len(ep.past) < len(gold[eid].steps):
        gold_action = expert_action(gold[eid], len(ep.past))
    return GenerationRequest(
        key=f"{eid}/{len(ep.past)}",
        messages=as_messages(generation_prompt(state, cfg.benchmark.name, cfg.prompt)),
        admissible_actions=view.admissible,
        gold_action=gold_action,
    )


def _record(ep: _Live, seed: int) -> EpisodeRecord:
    final = ep.view.score
    return EpisodeRecord(
        episode_id=ep.start.key,
        task_id=ep.start.task,
        variation=ep.start.variation,
        seed=seed,
        steps=ep.steps,
        max_score=max(ep.max_score, 0.0),
        final_score=final,
        success=ep.max_score >= 100,
    )


def _failed(start: Start, seed: int, reason: str) -> EpisodeRecord:
    """The record of an episode that could not be played: no steps, score 0, the reason."""
    return EpisodeRecord(
        episode_id=start.key,
        task_id=start.task,
        variation=start.variation,
        seed=seed,
        steps=[],
        max_score=0.0,
        final_score=0.0,
        success=False,
        failed=reason,
    )


def summarize(records: Sequence[EpisodeRecord], seed: int, replays: int) -> dict[str, Any]:
    """Protocol metrics of one seed: mean max score (0-100) and completion rate (failed episodes count 0).

    Args:
        records: The seed's episodes.
        seed: The sampling seed.
        replays: Episodes started again on a new env worker (:func:`count_replays`).
    """
    n = len(records)
    return {
        "seed": seed,
        "episodes": n,
        "failed": {r.episode_id: r.failed for r in records if r.failed},
        "replays": replays,  # episodes started again on a new env worker
        "score": sum(r.max_score for r in records) / n if n else float("nan"),
        "completion": proportion(sum(r.success for r in records), n),
        "mean_steps": sum(len(r.steps) for r in records) / n if n else float("nan"),
        "well_formed": proportion(
            sum(s["well_formed"] for r in records for s in r.steps), sum(len(r.steps) for r in records)
        ),
    }


def aggregate(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean +- std over seeds (the paper's three runs)."""
    score = mean_std([s["score"] for s in summaries])
    completion = mean_std([100 * s["completion"]["value"] for s in summaries])
    return {
        "seeds": [s["seed"] for s in summaries],
        "episodes": summaries[0]["episodes"] if summaries else 0,
        "failed": sum(len(s["failed"]) for s in summaries),  # episodes over all seeds
        "replays": sum(s.get("replays", 0) for s in summaries),
        "score_mean": score[0],
        "score_std": score[1],
        "completion_mean": completion[0],
        "completion_std": completion[1],
        "per_seed": list(summaries),
    }


def summary_line(result: dict[str, Any]) -> str:
    """The one line an evaluation ends with: episodes, score, success, and what went wrong with the envs."""
    line = (
        f"{result['benchmark']} {result['split']}: {result['episodes']} episodes x {len(result['seeds'])} seeds; "
        f"score {result['score_mean']:.2f} ± {result['score_std']:.2f}, "
        f"success {result['completion_mean']:.1f}% ± {result['completion_std']:.1f}"
    )
    failed, replays = result.get("failed", 0), result.get("replays", 0)
    if failed or replays:
        line += f"; {failed} episodes failed (score 0), {replays} replayed on a new env worker (see summary.json)"
    return line


def list_episodes(
    cfg: ExperimentConfig, split: str, tasks: Sequence[str] | None = None, max_variations: int | None = None
) -> list[tuple[str, int]]:
    """The (task, variation) episodes of a benchmark split, in protocol order (the adapter's ``episodes``).

    With ``max_tasks`` set (a smoke run), only the episodes of the first that many tasks.
    """
    episodes = adapter_of(cfg.benchmark).episodes(cfg.benchmark, split, tasks, max_variations)
    if cfg.max_tasks is None:
        return episodes
    first = list(dict.fromkeys(t for t, _ in episodes))[: cfg.max_tasks]
    return [(t, v) for t, v in episodes if t in first]


def load_gold(path: str | Path) -> dict[str, Trajectory]:
    """Expert trajectories by id (for the gold policy)."""
    return {t.trajectory_id: t for t in read_jsonl(path, Trajectory)}


def evaluate_policy(
    generator: Generator,
    cfg: ExperimentConfig,
    split: str,
    out_dir: str | Path,
    tasks: Sequence[str] | None = None,
    max_variations: int | None = None,
    seeds: Sequence[int] | None = None,
    workers: int | None = None,
    envs_per_worker: int | None = None,
    gold: dict[str, Trajectory] | None = None,
    progress: bool = True,
    env_pool: SharedEnvPool | None = None,
) -> dict[str, Any]:
    """Evaluate a policy on a benchmark split over several seeds (the paper's protocol by default).

    Args:
        generator: The policy.
        cfg: Experiment config (``eval.sampling``, ``eval.seeds``, ``benchmark.max_variations``).
        split: Benchmark split (ScienceWorld test = the protocol's 149 episodes with 5 variations).
        out_dir: Results folder: ``seed_<s>/episodes.jsonl``, ``seed_<s>/summary.json``, ``summary.json``.
        tasks: Restrict to these tasks.
        max_variations: Variations per task (default: ``benchmark.max_variations``).
        seeds: Sampling seeds (default: ``eval.seeds``).
        workers: Env worker processes (default: ``pipeline.eval.workers``).
        envs_per_worker: Envs per worker (default: ``pipeline.eval.envs_per_worker``).
        gold: Expert trajectories by id (gold policy).
        progress: Show progress bars.
        env_pool: Env workers to play on (left running); None: one set for all seeds (the envs, a JVM each on
            ScienceWorld, start once, not per seed), stopped after.

    Returns:
        Mean +- std over seeds, with the per-seed summaries.
    """
    bench = cfg.benchmark
    episodes = list_episodes(cfg, split, tasks, max_variations)
    out_dir = Path(out_dir)
    seeds = list(cfg.eval.seeds if seeds is None else seeds)
    workers = cfg.pipeline.eval.workers if workers is None else workers
    envs_per_worker = cfg.pipeline.eval.envs_per_worker if envs_per_worker is None else envs_per_worker
    with contextlib.ExitStack() as stack:
        if env_pool is None:
            factory = _env_factory(cfg, expert=generator.name == "gold")
            env_pool = stack.enter_context(SharedEnvPool(cfg, factory, workers, envs_per_worker, len(episodes)))
        summaries = []
        for s in seeds:
            play = Play(generator, cfg, s, cfg.eval.sampling, workers, envs_per_worker, gold, progress,
                        f"eval seed {s}", env_pool)  # fmt: skip
            summaries.append(run_episodes(play, episodes, out_dir / f"seed_{s}"))
    result = aggregate(summaries) | {
        "policy": generator.name,
        "benchmark": bench.name,
        "benchmark_title": bench.title,
        "benchmark_config": bench.model_dump(mode="json"),  # which protocol it was (the paper table reads it)
        "split": split,
    }
    write_text_atomic(out_dir / "summary.json", json.dumps(result, indent=2) + "\n")
    return result
