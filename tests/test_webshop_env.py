"""WebShop's own text env, from the user's WebShop checkout, on the shared 1,000-product catalog (small protocol).

Runs only where ``WEBSHOP_DIR`` names a WebShop checkout (princeton-nlp/WebShop; its code is never kept here)
and this Python has WebShop's packages (pyserini 0.17.0 with Java, spaCy with ``en_core_web_sm``, flask, bs4,
cleantext, rank_bm25, thefuzz, gym: docs/benchmarks.md 'WebShop'); CI has neither, so these skip there with the
reason. The checkout is copied and prepared in a temporary folder (``nemo-act webshop-setup``), so the user's
own stays as it is. Everything here is the real env: its products, search index, pages and reward.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_act.config import load_config
from nemo_act.data import Trajectory, read_jsonl, read_manifest

pytestmark = pytest.mark.heavy  # WebShop's JVM (pyserini) and spaCy in real processes

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def webshop_data(benchmarks_dir) -> Path:
    data = benchmarks_dir / "webshop" / "data"
    if not (data / "items_shuffle_1000.json").is_file():
        pytest.skip(f"the 1,000-product WebShop catalog is not at {data}")
    return data


@pytest.fixture(scope="module")
def checkout(webshop_data, tmp_path_factory) -> Path:
    """A prepared copy of the user's WebShop checkout (``WEBSHOP_DIR``) for the small protocol."""
    root = os.environ.get("WEBSHOP_DIR")
    if not root:
        pytest.skip("WEBSHOP_DIR is not set: WebShop's real env needs your WebShop checkout (docs/benchmarks.md)")
    copy = tmp_path_factory.mktemp("webshop") / "WebShop"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git", "data", "indexes*", "resources*"))
    done = subprocess.run(
        [sys.executable, "-m", "nemo_act.cli", "webshop-setup", "--webshop-dir", str(copy), "--data",
         str(webshop_data), "--protocol", "small"], capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1000 products indexed" in done.stdout
    return copy


def _cfg(checkout: Path, *extra: str):
    return load_config(overrides=["benchmark=webshop", "benchmark.protocol=small",
                                  f"benchmark.webshop_dir={checkout}", *extra])  # fmt: skip


def test_setup_refuses_a_missing_file_by_name(checkout, webshop_data, tmp_path):
    partial = tmp_path / "data"
    partial.mkdir()
    shutil.copyfile(webshop_data / "items_shuffle_1000.json", partial / "items_shuffle_1000.json")
    done = subprocess.run(
        [sys.executable, "-m", "nemo_act.cli", "webshop-setup", "--webshop-dir", str(checkout), "--data",
         str(partial), "--protocol", "small"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "items_ins_v2_1000.json" in done.stderr and "items_human_ins.json" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_gold_experts_buy_their_goal_at_reward_1(checkout, tmp_path):
    """The gold policy on 20 train goals in the real env: at least 19 bought at WebShop's reward 1.0, the rest
    counted by reason; every step holds the env's own page and available actions."""
    from nemo_act.steps.experts import collect_experts

    cfg = _cfg(checkout)
    out = tmp_path / "experts.jsonl"
    summary = collect_experts(cfg, "train", out, max_variations=20, workers=1, progress=False)
    counts = read_manifest(out)["counts"]
    assert summary.counts["episodes"] == 20 and counts["won"] >= 19, counts
    assert sum(v for k, v in counts.items() if k.startswith("gold_")) == 20
    trajs = list(read_jsonl(out, Trajectory))
    assert all(t.success and t.score == 100.0 and t.source == "webshop-gold" for t in trajs)
    first = trajs[0]
    assert first.steps[0].action.startswith("search[") and first.steps[-1].action == "click[buy now]"
    assert "search[<query>]" in first.steps[0].admissible_actions and "[SEP]" in first.steps[0].observation
    assert all(s.action_admissible for t in trajs for s in t.steps)
    params = read_manifest(out)["params"]
    assert params["benchmark"]["protocol"] == "small"  # the protocol is recorded in the manifest


def test_a_goal_is_the_same_in_every_process(checkout):
    """Goal i's instruction (price cap included) does not depend on the process that built the env."""
    code = (
        "import sys; from nemo_act.config import load_config; from nemo_act.benchmarks.webshop import EpisodeEnv; "
        f"cfg = load_config(overrides=['benchmark=webshop', 'benchmark.protocol=small', "
        f"'benchmark.webshop_dir={checkout}']).benchmark; env = EpisodeEnv(cfg); "
        "print(repr([env.reset('goal', i).task_description for i in (0, 1234, 6000)]))"
    )
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout.splitlines()[-1]
            for seed in ("1", "2")}  # fmt: skip
    assert len(runs) == 1 and "price lower than" in next(iter(runs))


def test_evaluation_scores_with_webshops_reward(checkout, tmp_path):
    """The random policy on 3 test goals in 2 env workers: episodes end by buying or at the step cap, their
    score is WebShop's reward x 100."""
    from nemo_act.evaluation.rollout import EpisodeRecord, evaluate_policy
    from nemo_act.generation import RandomGenerator

    cfg = _cfg(checkout, "benchmark.max_steps=6")
    res = evaluate_policy(RandomGenerator(), cfg, "test", tmp_path, tasks=["0", "1", "2"], seeds=[0], workers=2,
                          envs_per_worker=1, progress=False)  # fmt: skip
    assert res["episodes"] == 3
    records = list(read_jsonl(tmp_path / "seed_0" / "episodes.jsonl", EpisodeRecord))
    assert sorted(r.variation for r in records) == [0, 1, 2]
    assert all(0.0 <= r.final_score <= 100.0 and len(r.steps) <= 6 for r in records)


def test_the_full_protocol_refuses_the_small_catalog_and_says_why(checkout):
    from nemo_act.benchmarks.webshop import EpisodeEnv

    cfg = load_config(overrides=["benchmark=webshop", f"benchmark.webshop_dir={checkout}"]).benchmark
    assert cfg.protocol == "full"
    env = EpisodeEnv(cfg)
    with pytest.raises(FileNotFoundError, match=r"items_shuffle.json.*13 products only.*protocol=small"):
        env.reset("goal", 0)


def test_the_small_protocols_human_goals_are_those_of_its_products(checkout):
    from nemo_act.benchmarks.webshop import EpisodeEnv

    env = EpisodeEnv(_cfg(checkout).benchmark)
    human = env.goals("human")
    assert 13 <= len(human) < 100 and len({g["asin"] for g in human}) == 13
    obs = env.reset("human", len(human) - 1)
    assert obs.task_description and obs.admissible == ["search[<query>]"]
