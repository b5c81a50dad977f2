"""The causal rationale intervention (`nemo-act analyze intervention`) on real held-out pairs (random-policy
pairs of real ScienceWorld gold states): the three conditions' prompts, the injected rationale's target,
the metrics with a scripted checkpoint whose behaviour is known, and the tiny model through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nemo_act.analysis.intervention import CONDITIONS, THINK_CLOSED, Rationale, clean, prefill, run_intervention
from nemo_act.config.load import load_config
from nemo_act.data.io import read_jsonl
from nemo_act.data.records import Pair
from nemo_act.generation.base import GenerationRequest
from nemo_act.rewards import same_action
from nemo_act.steps.pairs import collect_pairs


@pytest.fixture(scope="module")
def heldout_pairs(sw_experts, tmp_path_factory):
    from nemo_act.generation.simple import RandomGenerator

    out = tmp_path_factory.mktemp("pairs") / "heldout_pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), load_config(), out, k=1, progress=False)
    return out


class Writer:
    """Writes a rationale for the pair's alternative and, to test the cleaning, tags the expert's action too."""

    name = "writer"

    def generate(self, requests, n, sampling, seed):
        return [[f"<think>Doing {r.gold_action} first keeps options open.</think> <action>look around</action>"] * n
                for r in requests]  # fmt: skip


class Follower:
    """A checkpoint that names the expert when left alone, the first candidate when rushed, and whatever the
    reasoning it is handed argues for."""

    name = "follower"

    def __init__(self, pairs):
        self.by_key = {p.pair_id: p for p in pairs}

    def generate(self, requests, n, sampling, seed):
        out = []
        for r in requests:
            pair_id, condition = r.key.rsplit("#", 1)
            p = self.by_key[pair_id]
            if condition == "free":
                out.append([f"The expert-looking move. <action>{p.expert_action}</action>"] * n)
            elif condition == "no_rationale":
                out.append([f"{p.candidates[0]}</action>"] * n)  # continues the opened tag
            else:
                assert p.alternative_action in r.prefill
                out.append([f"<action>{p.alternative_action}</action>"] * n)
        return out


def test_the_prefills_close_or_fill_the_reasoning_and_nothing_else():
    assert prefill("free", None, True) == prefill("free", None, False) == ""
    assert prefill("no_rationale", None, True) == THINK_CLOSED + "<action>"
    assert prefill("no_rationale", None, False) == "<action>"
    assert prefill("injected", "Because.", True) == "<think>\nBecause.\n</think>\n\n"
    assert prefill("injected", "Because.", False) == "Because.\n"
    assert clean("<think>It opens.</think> <action>go east</action> Then") == "It opens. Then"
    with pytest.raises(ValueError, match="needs a rationale"):
        prefill("injected", None, True)


@pytest.mark.heavy
@pytest.mark.slow
def test_the_three_rendered_prompts_differ_only_in_the_prefill(tiny_model_dir, heldout_pairs):
    """With the real tiny tokenizer's chat template: the same selection prompt, then the condition's prefill."""
    from nemo_act.evaluation.selection import selection_requests
    from nemo_act.generation.hf import HFGenerator

    cfg = load_config(overrides=["model.enable_thinking=true"])
    gen = HFGenerator(cfg.model, cfg.generation, name_or_path=str(tiny_model_dir))
    pair = next(iter(read_jsonl(heldout_pairs, Pair)))
    (req,) = selection_requests([pair], cfg)
    base = gen.render(req)
    for condition in CONDITIONS:
        fill = prefill(condition, "It keeps options open.", True)
        shown = gen.render(GenerationRequest(key=req.key, messages=req.messages, prefill=fill))
        assert shown == base + fill


@pytest.mark.heavy
@pytest.mark.slow
def test_metrics_follow_a_checkpoint_whose_behaviour_is_known(heldout_pairs, tmp_path):
    cfg = load_config(overrides=["analysis.intervention.pairs=6", "model.enable_thinking=true"])
    pairs = list(read_jsonl(heldout_pairs, Pair))
    made = []

    def make(name):
        made.append(name)
        return Writer() if name == "writer" else Follower(pairs)

    results = run_intervention({"init": "ckpt-a"}, heldout_pairs, "writer", cfg, tmp_path, make=make)
    r = results["init"]
    assert r["free"]["accuracy"]["value"] == 1.0 and r["free"]["accuracy"]["n"] == 6
    assert r["injected"]["accuracy"]["value"] == 0.0 and r["injected"]["followed"]["value"] == 1.0
    first = [p for p in pairs if p.pair_id in {json.loads(x)["pair_id"] for x in
                                               (tmp_path / "rationales.jsonl").read_text().splitlines()}]  # fmt: skip
    expected = sum(p.expert_index == 0 for p in first) / len(first)
    assert r["no_rationale"]["accuracy"]["value"] == pytest.approx(expected)  # "<action>" + its continuation parsed
    rationales = list(read_jsonl(tmp_path / "rationales.jsonl", Rationale))
    assert len(rationales) == 6
    for rat in rationales:
        assert not same_action(rat.injected_action, rat.expert_action)  # never the expert's
        assert "<action>" not in rat.rationale and rat.injected_action in rat.rationale
    md = (tmp_path / "intervention.md").read_text()
    assert "| init | 100.0 ± 0.0 |" in md and md.rstrip().endswith("| 0.0 ± 0.0 | 100.0 ± 0.0 |")
    assert (tmp_path / "intervention.png").read_bytes()[:4] == b"\x89PNG"
    assert made == ["writer", "ckpt-a"]
    run_intervention({"init": "ckpt-a"}, heldout_pairs, "writer", cfg, tmp_path, make=make)
    assert made == ["writer", "ckpt-a", "writer"]  # the finished conditions are reused, not generated again


@pytest.mark.heavy
@pytest.mark.slow
def test_cli_with_the_tiny_model_as_checkpoint_and_writer(tiny_model_dir, heldout_pairs, tmp_path):
    cmd = [
        sys.executable, "-m", "nemo_act.cli", "analyze", "intervention", "--checkpoint", f"init={tiny_model_dir}",
        "--pairs", str(heldout_pairs), "--writer", str(tiny_model_dir), "--out", str(tmp_path / "out"),
        "analysis.intervention.pairs=8", "analysis.intervention.sampling.max_new_tokens=16",
        "analysis.intervention.writer_sampling.max_new_tokens=24",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rationale intervention on 8 held-out pairs" in proc.stdout and "| init |" in proc.stdout
    results = json.loads((tmp_path / "out" / "intervention.json").read_text())
    written = 8 - results["_empty_rationales"]
    assert set(results["init"]) == set(CONDITIONS) and results["init"]["injected"]["followed"]["n"] == written
    for condition in CONDITIONS:
        lines = (tmp_path / "out" / "init" / f"{condition}.jsonl").read_text().splitlines()
        assert len(lines) == (written if condition == "injected" else 8)


class SilentWriter:
    """A writer that only ever answers with an action tag (what the untrained tiny model does)."""

    name = "silent"

    def generate(self, requests, n, sampling, seed):
        return [["<action>look around</action>"] * n for _ in requests]


@pytest.mark.heavy
@pytest.mark.slow
def test_pairs_without_a_written_rationale_are_left_out_of_the_injected_condition(heldout_pairs, tmp_path):
    cfg = load_config(overrides=["analysis.intervention.pairs=6"])
    pairs = list(read_jsonl(heldout_pairs, Pair))
    results = run_intervention({"init": "ckpt-a"}, heldout_pairs, "silent", cfg, tmp_path,
                               make=lambda name: SilentWriter() if name == "silent" else Follower(pairs))  # fmt: skip
    assert results["init"]["free"]["accuracy"]["n"] == 6 and results["init"]["injected"]["accuracy"]["n"] == 0
    assert not (tmp_path / "init" / "injected.jsonl").read_text().strip()  # nothing injected, nothing answered
    md = (tmp_path / "intervention.md").read_text()
    assert "6 of 6 rationales came out empty" in md and md.rstrip().endswith("no rationale to inject |")
    assert json.loads((tmp_path / "intervention.json").read_text())["_empty_rationales"] == 6
