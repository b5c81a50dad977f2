r"""Causal rationale intervention (``nemo-act analyze intervention``): does a choice follow its reasoning.

On held-out ACT pairs (``analysis.intervention.pairs``, 400 by default, a seeded sample) every checkpoint
answers the selection prompt under three conditions that differ only in how its answer begins
(:attr:`~nemo_act.generation.base.GenerationRequest.prefill`):

* ``free``: nothing prefilled; the model reasons and chooses as in held-out selection accuracy.
* ``no_rationale``: the reasoning is closed before it starts (an empty ``<think></think>`` block for a thinking
  chat template, ``model.enable_thinking: true``) and the answer opened (``<action>``): it must choose at once.
* ``injected``: the reasoning is prefilled with a plausible rationale for the **alternative** (never the
  expert's action), written once per pair by a writer model of the user's choice with our prompt
  (``intervention_rationale.txt``), and closed; the model completes its choice.

Reported per checkpoint and condition: choice accuracy (the expert named) and, under injection, the rate of
following the injected action, each with its binomial standard error, as a table (``intervention.md``,
``intervention.json``) and a bar plot (``intervention.png``). The rationales are kept with their pair in
``rationales.jsonl`` (the audit file); each checkpoint's answers in ``<checkpoint>/<condition>.jsonl``,
written when the condition finishes and reused by a rerun with the same checkpoint and settings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from nemo_act.common.seeding import key_digest, key_rng
from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.io import read_jsonl, write_jsonl, write_text_atomic
from nemo_act.data.records import Pair, _Record
from nemo_act.evaluation.selection import classify, selection_requests
from nemo_act.evaluation.stats import proportion
from nemo_act.generation import make_generator
from nemo_act.generation.base import GenerationRequest
from nemo_act.prompts.render import as_messages, rationale_prompt
from nemo_act.rewards import same_action
from nemo_act.run.cache import checkpoint_fingerprint

CONDITIONS = ("free", "no_rationale", "injected")
THINK_CLOSED = "<think>\n\n</think>\n\n"
_TAGS = re.compile(r"</?think>|<action>.*?(</action>|$)", re.IGNORECASE | re.DOTALL)


class Rationale(_Record):
    """The injected reasoning of one pair (a line of ``rationales.jsonl``)."""

    pair_id: str
    expert_action: str
    injected_action: str = Field(description="The action the rationale argues for: the pair's alternative.")
    writer: str
    prompt: str
    raw: str = Field(description="What the writer wrote.")
    rationale: str = Field(description="The text injected: tags and any action tag removed.")


class Answer(_Record):
    """One checkpoint's answer to one pair under one condition."""

    pair_id: str
    condition: str
    prefill: str
    response: str
    action: str | None
    outcome: str = Field(description="expert, alternative, neither or malformed.")
    followed: bool | None = Field(default=None, description="injected: the injected action was chosen.")


def sample_pairs(pairs: Sequence[Pair], n: int, seed: int) -> list[Pair]:
    """A seeded sample of ``n`` pairs (all of them when there are fewer), in file order."""
    if len(pairs) <= n:
        return list(pairs)
    keep = set(key_rng("intervention-pairs", seed).sample(range(len(pairs)), n))
    return [p for i, p in enumerate(pairs) if i in keep]


def clean(text: str) -> str:
    """A written rationale as injected: reasoning markers and any action tag removed, whitespace tidied."""
    return " ".join(_TAGS.sub(" ", text).split())


def prefill(condition: str, rationale: str | None, thinking: bool) -> str:
    """How an answer begins under a condition (see the module docstring)."""
    if condition == "free":
        return ""
    if condition == "no_rationale":
        return (THINK_CLOSED if thinking else "") + "<action>"
    if rationale is None:
        raise ValueError("the injected condition needs a rationale")
    return f"<think>\n{rationale}\n</think>\n\n" if thinking else f"{rationale}\n"


def write_rationales(writer: Any, pairs: Sequence[Pair], cfg: ExperimentConfig, out: Path) -> list[Rationale]:
    """One rationale per pair for its alternative, by ``writer`` (reused when ``out`` holds them all)."""
    if out.exists():
        done = {r.pair_id: r for r in read_jsonl(out, Rationale)}
        if all(p.pair_id in done and done[p.pair_id].writer == writer.name for p in pairs):
            return [done[p.pair_id] for p in pairs]
    iv = cfg.analysis.intervention
    prompts = [rationale_prompt(p.state, p.candidates, p.alternative_action, p.benchmark, cfg.prompt) for p in pairs]
    requests = [
        GenerationRequest(key=f"{p.pair_id}#rationale", messages=as_messages(t), gold_action=p.alternative_action)
        for p, t in zip(pairs, prompts, strict=True)
    ]
    texts = writer.generate(requests, 1, iv.writer_sampling, iv.seed)
    out_records = []
    for p, prompt_text, (raw,) in zip(pairs, prompts, texts, strict=True):
        if same_action(p.alternative_action, p.expert_action):
            raise ValueError(f"pair {p.pair_id}: its alternative is the expert's action")
        out_records.append(Rationale(pair_id=p.pair_id, expert_action=p.expert_action, writer=writer.name,
                                     injected_action=p.alternative_action, prompt=prompt_text, raw=raw,
                                     rationale=clean(raw)))  # fmt: skip
    write_jsonl(out, out_records)
    return out_records


def answer(
    generator: Any,
    pairs: Sequence[Pair],
    rationales: dict[str, Rationale],
    condition: str,
    cfg: ExperimentConfig,
) -> list[Answer]:
    """A checkpoint's answers under one condition: every pair, or under injection every pair with a rationale.

    A pair whose writer wrote nothing usable (empty after cleaning) has nothing to inject: it is left out of
    the injected condition (and counted in the table), never answered with an empty reasoning block.
    """
    iv = cfg.analysis.intervention
    thinking = cfg.model.enable_thinking is True
    if condition == "injected":
        pairs = [p for p in pairs if rationales[p.pair_id].rationale]
        if not pairs:
            return []
    requests = []
    for p, req in zip(pairs, selection_requests(pairs, cfg), strict=True):
        text = rationales[p.pair_id].rationale if condition == "injected" else None
        requests.append(GenerationRequest(key=f"{req.key}#{condition}", messages=req.messages,
                                          prefill=prefill(condition, text, thinking)))  # fmt: skip
    texts = generator.generate(requests, 1, iv.sampling, iv.seed)
    out = []
    for p, req, (text,) in zip(pairs, requests, texts, strict=True):
        opened = req.prefill if req.prefill.endswith("<action>") else ""
        outcome, parts = classify(p, opened + text, cfg)
        followed = outcome == "alternative" if condition == "injected" else None
        out.append(Answer(pair_id=p.pair_id, condition=condition, prefill=req.prefill, response=text,
                          action=parts.action, outcome=outcome, followed=followed))  # fmt: skip
    return out


def summarize(answers: Sequence[Answer], condition: str) -> dict[str, Any]:
    """Choice accuracy (and, under injection, the follow rate) with standard errors."""
    n = len(answers)
    out = {"accuracy": proportion(sum(a.outcome == "expert" for a in answers), n),
           "malformed": proportion(sum(a.outcome == "malformed" for a in answers), n)}  # fmt: skip
    if condition == "injected":
        out["followed"] = proportion(sum(bool(a.followed) for a in answers), n)
    return out


def run_intervention(
    checkpoints: dict[str, str],
    pairs_path: str | Path,
    writer_name: str,
    cfg: ExperimentConfig,
    out_dir: str | Path,
    make: Any = None,
) -> dict[str, dict[str, Any]]:
    """The three conditions for every checkpoint; writes the audit, answers, table and plot.

    Args:
        checkpoints: Name -> checkpoint (e.g. ``init``, ``01_act``), in the order to report.
        pairs_path: Held-out pairs.
        writer_name: The model that writes the injected rationales (a checkpoint or hub name).
        cfg: Experiment config (``analysis.intervention``, ``prompt``, ``rewards``, ``model``).
        out_dir: Results folder.
        make: Builds a policy from a name (default :func:`nemo_act.generation.make_generator`).

    Returns:
        Per checkpoint, per condition: the summary.
    """
    make = make or (lambda name: make_generator(name, cfg))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    iv = cfg.analysis.intervention
    pairs = sample_pairs(list(read_jsonl(pairs_path, Pair)), iv.pairs, iv.seed)
    if not pairs:
        raise ValueError(f"{pairs_path}: no pairs")
    rationales = {r.pair_id: r for r in write_rationales(make(writer_name), pairs, cfg, out / "rationales.jsonl")}
    settings = key_digest(json.dumps([iv.model_dump(), cfg.prompt.model_dump(), cfg.model.enable_thinking,
                                      [p.pair_id for p in pairs], writer_name])).hex()  # fmt: skip
    results: dict[str, dict[str, Any]] = {}
    for name, ckpt in checkpoints.items():
        stamp = key_digest(settings, checkpoint_fingerprint(ckpt)).hex()
        results[name] = {}
        generator = None
        for condition in CONDITIONS:
            path = out / name / f"{condition}.jsonl"
            stamp_file = path.with_suffix(".stamp")
            if path.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
                answers = list(read_jsonl(path, Answer))
            else:
                generator = generator or make(ckpt)
                answers = answer(generator, pairs, rationales, condition, cfg)
                write_jsonl(path, answers)
                write_text_atomic(stamp_file, stamp)
            results[name][condition] = summarize(answers, condition)
    empty = sum(not r.rationale for r in rationales.values())
    write_text_atomic(out / "intervention.json", json.dumps(results | {"_empty_rationales": empty}, indent=2) + "\n")
    (out / "intervention.md").write_text(table(results, len(pairs), empty))
    plot(results, out / "intervention.png")
    return results


def _pct(p: dict[str, float]) -> str:
    if not p["n"]:
        return "no rationale to inject"
    return f"{100 * p['value']:.1f} ± {100 * p['stderr']:.1f}"


def table(results: dict[str, dict[str, Any]], n: int, empty: int = 0) -> str:
    """Markdown: one row per checkpoint, accuracy per condition and the follow rate (%, ± standard error)."""
    lines = [f"rationale intervention on {n} held-out pairs (%, ± standard error)", "",
             "| checkpoint | free | no rationale | injected (for the alternative) | follows the injected action |",
             "|---|---|---|---|---|"]  # fmt: skip
    if empty:
        lines.insert(1, f"{empty} of {n} rationales came out empty (the writer wrote no reasoning): those pairs are "
                        "left out of the injected condition")  # fmt: skip
    for name, r in results.items():
        lines.append(f"| {name} | {_pct(r['free']['accuracy'])} | {_pct(r['no_rationale']['accuracy'])} | "
                     f"{_pct(r['injected']['accuracy'])} | {_pct(r['injected']['followed'])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(results: dict[str, dict[str, Any]], path: Path) -> Path:
    """Grouped bars per checkpoint: accuracy under each condition and the follow rate, with standard errors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [("free", "accuracy", "free"), ("no_rationale", "accuracy", "no rationale"),
            ("injected", "accuracy", "injected: accuracy"), ("injected", "followed", "injected: follows")]  # fmt: skip
    names = list(results)
    fig, ax = plt.subplots(figsize=(max(6, 2.5 * len(names)), 4))
    width = 0.8 / len(bars)
    for i, (cond, key, label) in enumerate(bars):
        xs = [j + (i - 1.5) * width for j in range(len(names))]
        vals = [100 * results[n][cond][key]["value"] for n in names]
        errs = [100 * results[n][cond][key]["stderr"] for n in names]
        ax.bar(xs, vals, width, yerr=errs, capsize=3, label=label)
    ax.axhline(50, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("% of held-out pairs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
