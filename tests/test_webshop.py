"""WebShop: the human-demonstration reader on the 9 real session logs in ../shared/benchmarks/webshop.

The 1,000-product catalog beside the logs (``webshop/data/items_shuffle_1000.json``) holds none of the 9
sessions' goal products and 1 of the 110 products they show (measured 2026-12-05), so the reader is tested on a
small catalog we make in WebShop's real format: every product the logs show, with the option values the workers
clicked. Titles of products other than the goal are made up; everything else comes from the logs. WebShop's own
text env on the real catalog: tests/test_webshop_env.py.
"""

import json
from pathlib import Path

import pytest

from nemo_act.benchmarks.webshop import (
    SEARCH_ACTION,
    available_actions,
    infer_action,
    load_catalog,
    read_demonstrations,
    read_session_log,
    render_page,
)
from nemo_act.data import Trajectory, read_jsonl, read_manifest, write_jsonl
from nemo_act.data.io import RecordError
from nemo_act.run.plan import plan

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def logs(benchmarks_dir) -> Path:
    path = benchmarks_dir / "webshop" / "all_trajs"
    if not path.is_dir():
        pytest.skip(f"WebShop session logs not found at {path}")
    return path


@pytest.fixture(scope="module")
def catalog_file(logs, tmp_path_factory) -> Path:
    """A small catalog in WebShop's items_shuffle format covering every product the logs show."""
    products: dict[str, dict] = {}
    for f in sorted(logs.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            entry = json.loads(line)
            goal, content = entry["goal"], entry.get("content") or {}
            asins = list(content.get("search_result_asins", [])) + [content.get("asin"), goal["asin"]]
            for asin in filter(None, asins):
                products.setdefault(
                    asin,
                    {
                        "asin": asin,
                        "name": goal["name"] if asin == goal["asin"] else f"Product {asin.lower()}",
                        "category": goal["category"],
                        "query": goal["query"],
                        "product_category": goal["product_category"],
                        "pricing": "$19.99" if asin != goal["asin"] else f"${goal['price_upper'] - 1:.2f}",
                        "full_description": f"About {asin}.",
                        "small_description": [f"Feature of {asin}."],
                        "images": [],
                        "customization_options": {},
                    },
                )
            for name, value in (content.get("options") or {}).items():
                opts = products[content["asin"]]["customization_options"].setdefault(name.title(), [])
                if all(o["value"] != value for o in opts):
                    opts.append({"value": value, "image": None})
    path = tmp_path_factory.mktemp("webshop") / "items_shuffle_small.json"
    path.write_text(json.dumps(list(products.values())))
    return path


@pytest.mark.heavy
def test_the_nine_real_session_logs_become_valid_trajectories(logs, catalog_file, tmp_path):
    trajs = read_demonstrations(logs, catalog_file)
    assert len(trajs) == 9
    out = tmp_path / "webshop_human.jsonl"
    write_jsonl(out, trajs)
    again = list(read_jsonl(out, Trajectory))  # validated on read
    assert again == trajs
    for t in trajs:
        assert t.steps[0].action.startswith("search[") and t.steps[-1].action == "click[buy now]"
        assert t.steps[0].admissible_actions == [SEARCH_ACTION]
        for step in t.steps:  # every click was on something the page offered
            assert step.action.startswith("search[") or step.action in step.admissible_actions, step.action
    # the done pages' rewards: one session bought the exact goal (1.0), one got 1/3
    rewards = {t.trajectory_id: t.score for t in trajs}
    assert rewards["webshop/20220427_1_6"] == pytest.approx(100 / 3)
    assert all(t.success == (t.score >= 100) for t in trajs)


@pytest.mark.heavy
def test_a_session_renders_as_webshop_text_pages(logs, catalog_file):
    traj = read_session_log(logs / "20220427_1_6.jsonl", load_catalog(catalog_file))
    assert [s.action for s in traj.steps][:3] == ["search[silver synthetic wig]", "click[b07cz2mqbs]", "click[< prev]"]
    assert traj.steps[-2].action == "click[3t280]"  # the option the worker chose, then buy
    first, results = traj.steps[0].observation, traj.steps[1].observation
    assert first.startswith("WebShop [SEP] Instruction: [SEP] ") and first.endswith(" [SEP] Search")
    assert "Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B07B6T26SV [SEP] " in results
    assert "click[next >]" in traj.steps[1].admissible_actions
    item = traj.steps[-2].observation
    assert " [SEP] color [SEP] 3t280 [SEP] " in item and item.endswith(
        "Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
    )


@pytest.mark.heavy
def test_reloads_are_no_step_and_impossible_transitions_fail(logs):
    idx = {"page": "index", "url": "u", "goal": {}}
    assert infer_action(idx, idx) is None
    done = {"page": "done", "url": "u", "goal": {}}
    with pytest.raises(ValueError, match="from page 'index' to page 'done'"):
        infer_action(idx, done)


@pytest.mark.heavy
def test_bad_logs_name_file_line_and_field(logs, catalog_file, tmp_path):
    lines = (logs / "20220427_1_18.jsonl").read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], lines[1].replace('"page": "search_results"', '"page": "checkout"')]) + "\n")
    with pytest.raises(RecordError, match=r"bad.jsonl:2: field 'page': unknown page 'checkout'"):
        read_session_log(bad, load_catalog(catalog_file))
    bad.write_text("\n".join(lines[:-1]) + "\n")  # no done page
    with pytest.raises(RecordError, match="must end on the 'done' page"):
        read_session_log(bad, load_catalog(catalog_file))
    empty = tmp_path / "empty_catalog.json"
    empty.write_text("[]")
    with pytest.raises(RecordError, match=r"20220427_1_18.jsonl:2: field 'content': 'B0\w+' not in the catalog"):
        read_session_log(logs / "20220427_1_18.jsonl", load_catalog(empty))


def test_available_actions_follow_the_text_env():
    info = {"has_search_bar": True, "clickables": ["search"]}
    assert available_actions(info) == [SEARCH_ACTION]
    info = {"has_search_bar": False, "clickables": ["back to search", "next >", "b07b6t26sv"]}
    assert available_actions(info) == ["click[back to search]", "click[next >]", "click[b07b6t26sv]"]


@pytest.mark.heavy
def test_render_page_needs_the_product(catalog_file):
    page = {"page": "item_page", "url": "u", "goal": {"instruction_text": "x"}, "content": {"asin": "NOPE"}}
    with pytest.raises(KeyError):
        render_page(page, load_catalog(catalog_file))


@pytest.mark.heavy
def test_experts_cli_converts_the_logs(benchmarks_dir, logs, catalog_file, tmp_path, capsys):
    from nemo_act.cli import main

    out = tmp_path / "webshop_human.jsonl"
    args = ["experts", "--benchmark", "webshop", "--split", "human", "--data-dir", str(benchmarks_dir / "webshop")]
    assert main([*args, "--out", str(out), f"benchmark.catalog={catalog_file}"]) == 0
    assert "/9 episodes won" in capsys.readouterr().out
    assert len(list(read_jsonl(out, Trajectory))) == 9
    assert read_manifest(out)["counts"]["episodes"] == 9


def test_evaluation_wiring_on_a_stand_in_text_env(cfg, tmp_path, monkeypatch):
    """The evaluation loop against tests/stand_ins/web_agent_site, a stand-in with the real env's interface: it runs
    in every CI. WebShop's own text env needs the user's checkout and its packages (tests/test_webshop_env.py runs it
    where WEBSHOP_DIR names one)."""
    import sys

    from nemo_act.config import load_config
    from nemo_act.evaluation.rollout import EpisodeRecord, evaluate_policy
    from nemo_act.generation import RandomGenerator

    monkeypatch.setattr(sys, "path", [str(Path(__file__).parent / "stand_ins"), *sys.path])  # spawned workers too
    monkeypatch.delenv("WEBSHOP_DIR", raising=False)  # the stand-in, not a real checkout a user may have set
    ws = load_config(overrides=["benchmark=webshop"])
    res = evaluate_policy(
        RandomGenerator(),
        ws,
        "test",
        tmp_path,
        tasks=["0", "1", "2", "3"],
        seeds=[0],
        workers=1,
        envs_per_worker=2,
        progress=False,
    )
    assert res["episodes"] == 4 and res["benchmark"] == "webshop"
    records = list(read_jsonl(tmp_path / "seed_0" / "episodes.jsonl", EpisodeRecord))
    assert sorted(r.variation for r in records) == [0, 1, 2, 3]
    assert all(len(r.steps) <= ws.benchmark.max_steps for r in records)
    assert records[0].steps[0]["action"] == SEARCH_ACTION  # the only action the search page lists
    for r in records:  # WebShop's 0-1 reward is a 0-100 score; success is reward 1
        assert r.final_score in (0.0, 25.0, 100.0) and r.success == (r.max_score == 100.0)


@pytest.mark.heavy
def test_reflection_recipes_stop_at_once_on_human_demonstrations_and_take_experts_from_a_file(
    logs, catalog_file, tmp_path, monkeypatch
):
    """The WebShop reflection-baseline recipes as shipped: branching replays an expert's prefix in its env
    episode, and the human demonstrations name none, so the run stops right after reading the experts (before
    any pair is sampled or the env started) and says what to set; with ``pipeline.experts.path`` (trajectories
    that name their goal, as a policy's rollouts in the env do) the experts are the file's successful ones."""
    from nemo_act.config import load_config
    from nemo_act.generation import RandomGenerator
    from nemo_act.reflection.early_experience import build_early_experience
    from nemo_act.run.pipeline import PipelineRunner

    data = tmp_path / "webshop"
    data.mkdir()
    (data / "all_trajs").symlink_to(logs)
    base = [f"benchmark.data_dir={data}", f"benchmark.catalog={catalog_file}"]
    recipes = REPO / "conf" / "recipes" / "webshop"
    for method in ("ee", "sand", "agent_r"):
        run = tmp_path / method
        # offline with an empty HF cache (whatever this machine has cached), the input check stops the recipe before
        # it reads a single expert (what a user without its Qwen3-8B should see); then pipeline.init=random
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
        recipe = load_config(recipes / f"{method}-qwen3-8b-4n4g-megatron.yaml", [*base, f"run_dir={run}"])
        with pytest.raises(ValueError, match=r"model.name_or_path: Qwen/Qwen3-8B: no such folder here"):
            PipelineRunner(recipe).run()
        assert not run.exists()  # stopped before any step
        runner = PipelineRunner(
            load_config(
                recipes / f"{method}-qwen3-8b-4n4g-megatron.yaml", [*base, f"run_dir={run}", "pipeline.init=random"]
            )
        )
        with pytest.raises(ValueError, match=r"9 of 9 trajectories name no episode .*pipeline\.experts\.path=FILE"):
            runner.run()
        assert len(list(read_jsonl(run / "data" / "experts.jsonl", Trajectory))) == 9  # read, then stopped
        assert sorted(p.name for p in (run / "data").iterdir()) == ["experts.jsonl", "experts.jsonl.manifest.json"]
    cfg = load_config(recipes / "sand-qwen3-8b-4n4g-megatron.yaml", base)
    assert cfg.sand.candidates == 3  # SAND's N on WebShop
    human = tmp_path / "human.jsonl"
    write_jsonl(human, read_demonstrations(logs, catalog_file))
    with pytest.raises(ValueError, match="Early Experience replays expert episodes"):  # the CLI's builder too
        build_early_experience(cfg, human, RandomGenerator(), tmp_path / "ee_cli", 1)

    # experts that name their goal (here the demonstrations given goal indices, as rollouts in the env would)
    played = tmp_path / "webshop_rollouts.jsonl"
    write_jsonl(
        played, [t.model_copy(update={"variation": 1500 + i}) for i, t in enumerate(read_jsonl(human, Trajectory))]
    )
    run = tmp_path / "from_file"
    cfg = load_config(
        recipes / "ee-qwen3-8b-4n4g-megatron.yaml", [*base, f"run_dir={run}", f"pipeline.experts.path={played}"]
    )
    runner = PipelineRunner(cfg)
    assert plan(runner)[0]["inputs"] == f"successful trajectories of {played}"
    experts = runner.experts("experts")
    kept = list(read_jsonl(experts, Trajectory))
    assert kept == [t for t in read_jsonl(played, Trajectory) if t.success] and len(kept) == 2  # two won (reward 1)
    manifest = read_manifest(experts)
    assert manifest["params"]["from_rollouts"] == str(played) and len(manifest["counts"]["failed"]) == 9 - len(kept)
    stamp = experts.stat().st_mtime_ns
    assert runner.experts("experts") == experts and experts.stat().st_mtime_ns == stamp  # reused, not rewritten
    write_jsonl(played, [t.model_copy(update={"variation": 0}) for t in read_jsonl(played, Trajectory)][:1])
    runner.experts("experts")  # the file changed: imported again
    assert read_manifest(experts)["counts"]["episodes"] == 1


def test_the_small_protocol_splits_goals_by_index_and_plays_its_experts():
    """``benchmark.protocol=small``: WebShop's synthetic goals split by index (test 0-499 as verl-agent's, dev,
    train), experts played live (the full protocol reads the human demonstrations)."""
    from nemo_act.benchmarks.webshop import episodes
    from nemo_act.config import load_config

    small = load_config(overrides=["benchmark=webshop", "benchmark.protocol=small"]).benchmark
    full = load_config(overrides=["benchmark=webshop"]).benchmark
    assert (small.live_experts, full.live_experts, full.protocol) == (True, False, "full")
    assert episodes(small, "test", None, None) == [("goal", i) for i in range(500)]
    assert episodes(small, "train", None, 3) == [("goal", 1000), ("goal", 1001), ("goal", 1002)]
    assert episodes(small, "dev", ["512"], None) == [("goal", 512)]
    assert episodes(small, "human", ["0", "4"], None) == [("human", 0), ("human", 4)]
    assert episodes(full, "test", None, None)[-1] == ("goal", 499)
    with pytest.raises(ValueError, match=r"goals \[700\] are not in split 'test' \(goals 0-499\)"):
        episodes(small, "test", ["700"], None)
    with pytest.raises(ValueError, match="unknown WebShop split 'valid'.*test, dev, train, or human"):
        episodes(small, "valid", None, None)


def test_the_full_protocol_refuses_a_checkout_with_only_the_small_catalog(tmp_path):
    """A checkout laid out as WebShop's (``web_agent_site/``, ``data/``) with only the 1,000-product files: the
    full protocol stops before any env is built, saying why; the small one asks WebShop for 1,000 products."""
    from nemo_act.benchmarks.webshop import _server_kwargs, webshop_root
    from nemo_act.config import load_config

    (tmp_path / "web_agent_site").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "items_shuffle_1000.json").write_text("[]")
    full = load_config(overrides=["benchmark=webshop", f"benchmark.webshop_dir={tmp_path}"]).benchmark
    with pytest.raises(FileNotFoundError, match=r"lacks items_shuffle.json, items_ins_v2.json.*13 products only"):
        _server_kwargs(full, "goal")
    small = full.model_copy(update={"protocol": "small"})
    assert _server_kwargs(small, "goal") == {"num_products": 1000, "human_goals": False}
    assert _server_kwargs(small, "human") == {"num_products": 1000, "human_goals": True}
    (tmp_path / "data" / "items_shuffle.json").write_text("[]")
    (tmp_path / "data" / "items_ins_v2.json").write_text("{}")
    assert _server_kwargs(full, "goal") == {
        "human_goals": True,
        "file_path": str(tmp_path / "data" / "items_shuffle.json"),
    }
    with pytest.raises(FileNotFoundError, match="no web_agent_site/ there"):
        webshop_root(full.model_copy(update={"webshop_dir": str(tmp_path / "data")}))


def test_the_gold_policys_drops_are_printed_by_reason():
    from nemo_act.benchmarks.webshop import expert_summary

    line = expert_summary({"gold_bought": 91, "gold_own_product_below_1": 8, "gold_not_found": 1, "won": 91})
    assert line == [
        "gold policy: 91 bought at reward 1.0; dropped: 1 the search never listed the goal's product; "
        "8 WebShop's reward scores the goal's own product and options below 1"
    ]
    assert expert_summary({"won": 3}) == []


def test_webshop_setup_is_a_subcommand_the_adapter_offers(tmp_path, capsys):
    """Issue 47: the CLI names no benchmark; ``webshop-setup`` comes from WebShop's adapter (``add_commands``),
    and a folder that is no WebShop checkout is refused in one line, exit 2, before anything is written."""
    from nemo_act import cli
    from nemo_act.benchmarks import webshop

    assert "webshop-setup" in cli.build_parser().format_help() and hasattr(webshop, "add_commands")
    assert cli.main(["webshop-setup", "--webshop-dir", str(tmp_path), "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --webshop-dir {tmp_path}: not a WebShop checkout (no web_agent_site/ or search_engine/)"]
    assert list(tmp_path.iterdir()) == []
