"""The env worker pool never hangs on an env: a call past its deadline ends the worker, the episode is
replayed on a new one, and after ``env.max_restarts`` replays it is recorded as failed with the reason.

The envs here are stand-ins whose ``step`` sleeps for an hour on the episode named "hang" (what a stuck
JVM round trip or ALFWorld reset looks like from the pool: a call that never returns)."""

import json
import os
import time

import pytest
from tqdm import tqdm

from nemo_act.config import load_config
from nemo_act.data.io import ResumableJsonl
from nemo_act.evaluation.env_worker import with_deadline
from nemo_act.evaluation.pool import EnvPool
from nemo_act.evaluation.rollout import (
    EpisodeRecord,
    Play,
    Scheduler,
    Start,
    aggregate,
    count_replays,
    play_starts,
    replays_path,
    summarize,
    summary_line,
)
from nemo_act.generation import RandomGenerator


class SleepyEnv:
    """Episodes of 2 steps; every call on the episode "hang" (reset or step, as chosen) sleeps for an hour."""

    def __init__(self, hang_on: str = "step") -> None:
        self.hang_on, self.task, self.t = hang_on, None, 0

    def _view(self):
        return {
            "observation": f"{self.task} at {self.t}",
            "task_description": "stand in",
            "admissible": ["wait", "look"],
            "score": 50.0 * self.t,
            "done": self.t >= 2,
        }

    def reset(self, task, variation):
        self.task, self.t = task, 0
        if self.task == "hang" and self.hang_on == "reset":
            time.sleep(3600)
        return self._view()

    def step(self, action):
        if self.task == "hang":
            time.sleep(3600)
        self.t += 1
        return self._view()

    def branch(self, task, action):
        """A stand-in for :class:`nemo_act.steps.branching.BranchingEnv`'s: a state restored, one action taken."""
        if task == "lost":
            return "diverged: the record says otherwise"
        self.reset(task, 0)
        return self.step(action)

    def close(self):
        pass


class Player:
    """An expert player as in nemo_act.steps.experts: many env calls per pool call, each under the deadline."""

    def __init__(self, seconds: float) -> None:
        self.env = with_deadline(SleepyEnv(), seconds)

    def play(self, task: str) -> str:
        self.env.reset(task, 0)
        return self.env.step("wait")["observation"]

    def close(self):
        pass


def test_a_hung_step_ends_its_worker_and_the_others_answer():
    with EnvPool(SleepyEnv, workers=2, envs_per_worker=1, call_timeout=1.0) as pool:
        pool.run({0: ("reset", ("hang", 0)), 1: ("reset", ("ok", 0))})
        start = time.monotonic()
        out = pool.run({0: ("step", ("wait",)), 1: ("step", ("wait",))})
        assert time.monotonic() - start < 20
        assert set(out) == {1} and out[1]["observation"] == "ok at 1"
        lost = pool.pop_lost_slots()
        assert set(lost) == {0} and "past its deadline" in lost[0]
        assert pool.run({0: ("reset", ("ok", 1))})[0]["observation"] == "ok at 0"  # the new worker works
        assert pool.restarts == 1


def test_a_stopped_worker_is_replaced_within_one_call_deadline_whatever_its_batch():
    """SIGSTOP: the worker's own timer cannot fire, so the parent's deadline is what finds it. It holds per call:
    with 4 envs per worker (a batch of 4 calls) the worker is given up call_timeout + GRACE_S after its last
    answer, not after 4 x call_timeout (issue 25: 1,230 s at the defaults before)."""
    import os
    import signal

    from nemo_act.evaluation.pool import GRACE_S

    timeout = 3.0
    with EnvPool(SleepyEnv, workers=2, envs_per_worker=4, call_timeout=timeout) as pool:
        pool.run({s: ("reset", ("ok", 0)) for s in range(8)})  # both workers warm (envs built, answered)
        os.kill(pool._procs[0].pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            out = pool.run({s: ("step", ("wait",)) for s in range(8)})
            took = time.monotonic() - start
        finally:
            os.kill(pool._procs[0].pid, signal.SIGCONT)  # a new worker by now; the old one was killed
        assert set(out) == {4, 5, 6, 7} and all(v["observation"] == "ok at 1" for v in out.values())
        assert timeout + GRACE_S - 0.5 <= took < timeout + 10, took
        lost = pool.pop_lost_slots()
        assert set(lost) == {0, 1, 2, 3} and all("no answer within" in r for r in lost.values())
        assert pool.restarts == 1
        assert pool.run({0: ("reset", ("ok", 1))})[0]["observation"] == "ok at 0"  # the new worker works


def test_imap_replays_a_hung_call_then_reports_it_failed():
    from functools import partial

    with EnvPool(partial(Player, 1.0), workers=2, envs_per_worker=1) as pool:
        results = {
            k: (status, value) for k, status, value in pool.imap([(t, "play", (t,)) for t in ("a", "hang", "b")], 1)
        }
    assert results["a"] == ("ok", "a at 1") and results["b"] == ("ok", "b at 1")
    status, reason = results["hang"]
    assert status == "failed" and "past its deadline" in reason and "after 2 tries" in reason
    assert pool.restarts == 2


class BrokenInstall:
    """An env whose construction fails as a missing package or model does (WebShop without its spaCy model)."""

    def __init__(self) -> None:
        raise OSError("[E050] Can't find model 'en_core_web_sm'")


def test_an_env_that_cannot_be_built_is_an_error_naming_why_not_a_restart_loop():
    """Every call is answered with the construction's error (before: the worker died, was restarted
    ``max_restarts`` times per call, and each episode was counted lost with no reason)."""
    with EnvPool(BrokenInstall, workers=1, envs_per_worker=1) as pool:
        results = list(pool.imap([(t, "play", (t,)) for t in ("a", "b")], 2))
        with pytest.raises(RuntimeError, match="building the env failed: OSError: .*en_core_web_sm"):
            pool.run({0: ("reset", ("a", 0))})
    assert [(k, status) for k, status, _ in results] == [("a", "error"), ("b", "error")]
    assert "building the env failed: OSError: [E050]" in results[0][2] and pool.restarts == 0


@pytest.mark.parametrize("hang_on", ["reset", "step"])
def test_evaluation_records_a_hung_episode_as_failed_and_finishes_the_rest(hang_on, tmp_path):
    from functools import partial

    cfg = load_config(overrides=["env.max_restarts=1"])
    queue = [Start(f"scienceworld/{t}/0", t, 0, ("reset", (t, 0))) for t in ("a", "hang", "b")]
    log = ResumableJsonl(tmp_path / "episodes.jsonl", EpisodeRecord, key="episode_id")
    with log, EnvPool(partial(SleepyEnv, hang_on), 2, 1, call_timeout=1.0) as pool, tqdm(disable=True) as bar:
        play = Play(RandomGenerator(), cfg, 0, cfg.eval.sampling, 2, 1)
        Scheduler(pool, play, list(queue), log, bar, log.out).run()
    records = {r.task_id: r for r in log.records}
    replays = [json.loads(x) for x in replays_path(log.out).read_text().splitlines()]
    assert set(records) == {"a", "hang", "b"}
    assert records["a"].success and records["b"].success and not records["a"].failed
    hung = records["hang"]
    assert (
        not hung.success and hung.max_score == 0 and "past its deadline" in hung.failed and "(2 times)" in hung.failed
    )
    again = [r["episode_id"] for r in replays]
    assert again.count("scienceworld/hang/0") == 1  # started again once, then failed
    assert all("past its deadline" in r["reason"] for r in replays)  # and perhaps a neighbour of the hang
    summary = summarize(list(log.records), 0, count_replays(log.out))
    assert summary["failed"] == {"scienceworld/hang/0": hung.failed} and summary["episodes"] == 3
    assert summary["replays"] == len(replays) >= 1
    result = aggregate([summary]) | {"benchmark": "scienceworld", "split": "test"}
    assert result["failed"] == 1 and result["replays"] == summary["replays"]
    line = summary_line(result)
    assert f"1 episodes failed (score 0), {summary['replays']} replayed on a new env worker" in line


def test_branched_starts_play_on_from_their_first_action_and_a_lost_one_is_recorded(tmp_path):
    """A branched start's first step is the action it was given (completed from the env's answer) with the
    prefix in the policy's history; the step budget counts from the episode's start; a start whose state
    cannot be restored is recorded as failed with the reason, not retried."""
    from functools import partial

    cfg = load_config()
    prefix = (("a at 0", "wait"),)
    first = ({"prompt": None, "output": None, "action": "look", "well_formed": True},)
    starts = [
        Start("a#0", "a", 0, ("branch", ("a", "look")), past=prefix + (("a at 0", "look"),), first=first),
        Start("b#0", "b", 0, ("branch", ("b", "look")), past=prefix + (("b at 0", "look"),), first=first, max_steps=2),
        Start("lost#0", "lost", 0, ("branch", ("lost", "look")), first=first),
    ]
    play = Play(RandomGenerator(), cfg, 0, cfg.eval.sampling, workers=1, envs_per_worker=2, progress=False)
    records = play_starts(play, starts, tmp_path / "r.jsonl", partial(SleepyEnv))
    a, b, lost = records
    assert [s["action"] for s in a.steps][:1] == ["look"] and a.steps[0]["observation"] == "a at 1"
    assert len(a.steps) == 2 and a.success and a.max_score == 100  # one policy step to the end
    assert "Action: look" in a.steps[1]["prompt"] and "Action: wait" in a.steps[1]["prompt"]
    assert len(b.steps) == 1 and b.max_score == 50  # budget 2 from the start: the prefix and the branch
    assert lost.failed == "diverged: the record says otherwise" and lost.steps == []


def test_two_lanes_step_envs_while_the_policy_answers_and_write_what_one_lane_writes(tmp_path):
    """``env.lanes=2``: one lane's env steps run while the other lane's generate call is in flight (the call
    intervals overlap, which never happens with one lane), and the episodes file is the one-lane file byte for
    byte (the random policy seeds each request from its key, as vLLM does)."""
    import threading
    from functools import partial

    class SlowRandom(RandomGenerator):
        """The random policy taking 0.2 s per call (a GPU call), its call intervals recorded."""

        def __init__(self) -> None:
            super().__init__()
            self.calls, self._lock = [], threading.Lock()

        def generate(self, requests, n, sampling, seed):
            t0 = time.monotonic()
            time.sleep(0.2)
            out = super().generate(requests, n, sampling, seed)
            with self._lock:
                self.calls.append((t0, time.monotonic()))
            return out

    class TimedPool(EnvPool):
        """The process pool, its step calls' intervals recorded."""

        steps: list

        def run(self, calls):
            t0 = time.monotonic()
            out = super().run(calls)
            if any(method == "step" for method, _ in calls.values()):
                self.steps.append((t0, time.monotonic()))
            return out

    class Given:
        def __init__(self, pool):
            self.pool = pool

        def get(self):
            return self.pool

    starts = [Start(f"x/{t}/0", t, 0, ("reset", (t, 0))) for t in "abcdef"]
    files, overlapped = {}, {}
    for lanes in (1, 2):
        cfg = load_config(overrides=[f"env.lanes={lanes}"])
        policy = SlowRandom()
        with TimedPool(partial(SleepyEnv), 2, 2) as pool:
            pool.steps = []
            out = tmp_path / f"lanes{lanes}.jsonl"
            play = Play(policy, cfg, 0, cfg.eval.sampling, workers=2, envs_per_worker=2, progress=False,
                        env_pool=Given(pool))  # fmt: skip
            records = play_starts(play, starts, out, None)
        assert [r.episode_id for r in records] == [s.key for s in starts] and all(r.success for r in records)
        files[lanes] = out.read_text()
        overlapped[lanes] = any(g0 < s0 and s1 < g1 for g0, g1 in policy.calls for s0, s1 in pool.steps)
    assert files[2] == files[1]
    assert overlapped == {1: False, 2: True}


def test_an_evaluation_starts_no_more_envs_than_it_has_episodes():
    """1 episode with 2 workers x 2 envs asked: one worker with one env (a JVM each on ScienceWorld); 3 episodes with
    4 x 1: 3 workers; 5 with 2 x 4: all asked (the slots an episode takes never change); nothing starts before use."""
    from functools import partial

    from nemo_act.evaluation.rollout import SharedEnvPool

    cfg = load_config()
    for episodes, asked, started in ((1, (2, 2), (1, 1)), (5, (2, 4), (2, 4)), (3, (4, 1), (3, 1))):
        with SharedEnvPool(cfg, partial(SleepyEnv), *asked, episodes=episodes) as shared:
            assert shared._pool is None
            pool = shared.get()
            assert (pool.workers, pool.envs_per_worker) == started and shared.get() is pool


class DiesAtStart:
    """An env worker that dies before it answers (as one whose interpreter cannot import the package)."""

    def __init__(self) -> None:
        os._exit(3)


def test_an_evaluation_whose_every_episode_failed_stops_and_a_rerun_plays_them_all(tmp_path, monkeypatch):
    """Env workers that die at start lose every episode: the evaluation stops naming why instead of writing a 0%
    summary (a bench cell once reported 0% this way), its records are moved aside, and the rerun plays anew."""
    from functools import partial

    from nemo_act.evaluation import rollout

    cfg = load_config(overrides=["env.max_restarts=1"])
    play = Play(RandomGenerator(), cfg, 0, cfg.eval.sampling, workers=1, envs_per_worker=2, progress=False)
    episodes = [("a", 0), ("b", 0)]
    monkeypatch.setattr(rollout, "_env_factory", lambda cfg, expert: DiesAtStart)
    with pytest.raises(RuntimeError, match=r"every one of the 2 episodes failed \(.*\(2 times\)\); nothing is scored"):
        rollout.run_episodes(play, episodes, tmp_path)
    assert not (tmp_path / "summary.json").exists() and not (tmp_path / "episodes.jsonl").exists()
    assert len((tmp_path / "episodes.failed.jsonl").read_text().splitlines()) == 2
    monkeypatch.setattr(rollout, "_env_factory", lambda cfg, expert: partial(SleepyEnv))
    summary = rollout.run_episodes(play, episodes, tmp_path)
    assert summary["episodes"] == 2 and summary["failed"] == {} and summary["replays"] == 0
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
