"""WebShop adapter: human demonstrations as expert trajectories, and the real text env for evaluation.

**Human demonstrations.** WebShop's human-session logs (``all_trajs/*.jsonl``) hold one JSON object
per page the worker saw (``page``, ``url``, ``goal``, ``content``; the ``done`` page also ``reward``).
:func:`read_session_log` turns a log into one trajectory: each step is the page the worker was on
(rendered as WebShop's ``text`` observation mode renders it), the action that led to the next page
(``search[...]`` or ``click[...]``, inferred from the two pages) and the actions available there.
Rendering needs the products' titles, prices and options: a catalog in WebShop's
``items_shuffle*.json`` format (the user's download; tests use a small one in the same format).

Pages are rendered after WebShop's templates (princeton-nlp/WebShop @ 64fa2a5): the visible texts of
the page joined by `` [SEP] ``. The log does not record how many results a search found; we show
WebShop's cap (``SEARCH_RETURN_N`` = 50), which is what almost every search returns on the full catalog.
Pages the log shows twice in a row with nothing changed (a reload) are no step.

**Available actions** follow ``WebAgentTextEnv.get_available_actions``: the clickables (button texts
and product ASINs lower-cased, option values as the catalog spells them after WebShop's
normalisation) as ``click[...]``, and ``search[<query>]`` where the page has a search bar. The ACT
reward has no admissibility term on WebShop (the paper; docs/method.md): that open template is why.

**Evaluation** runs the real ``WebAgentTextEnv`` (``observation_mode="text"``, human goals 0-499),
which needs a full WebShop install (the ``web_agent_site`` package, its product files, search index
and spaCy model); :class:`EpisodeEnv` says so when it is missing.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_act.benchmarks.base import Observation
from nemo_act.config.schema import BenchmarkConfigBase
from nemo_act.data.io import RecordError, iter_json
from nemo_act.data.records import Step, Trajectory

SEP = " [SEP] "
SEARCH_ACTION = "search[<query>]"
SEARCH_RETURN_N = 50  # WebShop's engine.SEARCH_RETURN_N
SOURCE = "webshop-human"
_PAGES = ("index", "search_results", "item_page", "item_sub_page", "done")
_SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")

ADAPTER_VERSION = 1  # webshop: bump when what its experts record changes


class WebShopConfig(BenchmarkConfigBase):
    """WebShop: human-demonstration reader, and the text env of a full WebShop install."""

    name: Literal["webshop"]
    data_dir: str | None = Field(description="WebShop folder (None: $WEBSHOP_DATA).")
    demonstrations: str = Field(description="Human-session logs (all_trajs/*.jsonl), relative to data_dir.")
    catalog: str = Field(description="Product file in items_shuffle format, relative to data_dir.")


class Product(BaseModel):
    """What a page shows of one catalog product (after WebShop's ``load_products`` normalisation)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    asin: str
    title: str
    price: str
    options: dict[str, list[str]]
    description: str
    bullet_points: list[str]


def _price_tag(pricing: Any) -> str:
    if not pricing:
        return "$100.0"
    values = [float(re.sub(r"[^\d.]", "", p)) for p in str(pricing).split("$")[1:]]
    return f"${values[0]}" if len(values) == 1 else f"${values[0]} to ${values[1]}"


def load_catalog(path: str | Path) -> dict[str, Product]:
    """Read products from a WebShop ``items_shuffle*.json`` file (a JSON list of product dicts).

    Raises:
        RecordError: The file is not a list of products with ``asin`` and ``name``.
    """
    path = Path(path)
    try:
        items = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from err
    if not isinstance(items, list):
        raise RecordError(f"{path}: expected a JSON list of products (WebShop items_shuffle format)")
    catalog: dict[str, Product] = {}
    for i, item in enumerate(items):
        missing = [k for k in ("asin", "name") if k not in item]
        if missing:
            raise RecordError(f"{path}: product {i}: field '{missing[0]}' missing")
        options = {
            name.lower(): [c["value"].strip().replace("/", " | ").lower() for c in contents]
            for name, contents in (item.get("customization_options") or {}).items()
            if contents is not None
        }
        small = item.get("small_description") or []
        catalog.setdefault(
            item["asin"],
            Product(
                asin=item["asin"],
                title=item["name"],
                price=_price_tag(item.get("pricing")),
                options=options,
                description=item.get("full_description") or "",
                bullet_points=small if isinstance(small, list) else [small],
            ),
        )
    return catalog


def _instruction(goal: dict) -> list[str]:
    return ["Instruction:", goal["instruction_text"]]


def render_page(entry: dict, catalog: dict[str, Product]) -> tuple[str, list[str]]:
    """Render a logged page as WebShop's ``text`` observation and list its available actions.

    Args:
        entry: One log line (``page``, ``goal``, ``content``, ``url``).
        catalog: Products by ASIN.

    Returns:
        (observation, available actions).

    Raises:
        KeyError: A product the page shows is not in the catalog.
    """
    page, goal, content = entry["page"], entry["goal"], entry.get("content") or {}
    back = ["Back to Search"]
    if page == "index":
        return SEP.join(["WebShop", *_instruction(goal), "Search"]), [SEARCH_ACTION]
    if page == "search_results":
        number = int(content.get("page", 1))
        nav = (["< Prev"] if number > 1 else []) + ["Next >"]
        texts = [*_instruction(goal), *back, f"Page {number} (Total results: {SEARCH_RETURN_N})", *nav]
        asins = content["search_result_asins"]
        for asin in asins:
            product = catalog[asin]
            texts += [asin, product.title, product.price]
        actions = [f"click[{b.lower()}]" for b in back + nav] + [f"click[{a.lower()}]" for a in asins]
        return SEP.join(texts), actions
    product = catalog[content["asin"]]
    if page == "item_page":
        texts = [*_instruction(goal), *back, "< Prev"]
        for name, values in product.options.items():
            texts += [name, *values]
        buttons = ["Description", "Features", "Reviews", "Buy Now"]
        texts += [product.title, f"Price: {product.price}", "Rating: N.A.", *buttons]
        values = [v for vs in product.options.values() for v in vs]
        actions = [f"click[{b.lower()}]" for b in [*back, "< Prev", *buttons[:3]]]
        actions += [f"click[{v}]" for v in values] + ["click[buy now]"]
        return SEP.join(texts), actions
    if page == "item_sub_page":
        sub = _sub_page(entry)
        body = {"Description": [product.description], "Features": product.bullet_points}.get(sub, [])
        texts = [*_instruction(goal), *back, "< Prev", *[b for b in body if b]]
        return SEP.join(texts), ["click[back to search]", "click[< prev]"]
    raise ValueError(f"no observation for page '{page}'")


def _sub_page(entry: dict) -> str:
    for name in _SUB_PAGES:
        if f"/{name}/" in entry["url"]:
            return name
    raise ValueError(f"item_sub_page url names none of {', '.join(_SUB_PAGES)}")


def _keywords(content: dict) -> list[str]:
    kw = content.get("keywords", [])
    if isinstance(kw, str):  # item pages log them as the repr of a list
        kw = json.loads(kw.replace("'", '"')) if kw.startswith("[") else [kw]
    return list(kw)


def infer_action(prev: dict, cur: dict) -> str | None:
    """The action that leads from one logged page to the next (None: a reload, no step).

    Raises:
        ValueError: No WebShop action leads from ``prev`` to ``cur``.
    """
    p, c = prev["page"], cur["page"]
    pc, cc = prev.get("content") or {}, cur.get("content") or {}
    if c == "index":
        return None if p == "index" else "click[back to search]"
    if c == "search_results":
        if p == "index":
            return f"search[{' '.join(cc['keywords'])}]"
        if p == "search_results" and _keywords(pc) == _keywords(cc):
            step = int(cc.get("page", 1)) - int(pc.get("page", 1))
            return {0: None, 1: "click[next >]", -1: "click[< prev]"}.get(step) or _no_action(p, c)
        if p == "item_page" and _keywords(pc) == _keywords(cc):
            return "click[< prev]"
    if c == "item_page":
        if p == "search_results":
            return f"click[{cc['asin'].lower()}]"
        if p == "item_sub_page":
            return "click[< prev]"
        if p == "item_page" and pc.get("asin") == cc.get("asin"):
            changed = [v for k, v in cc.get("options", {}).items() if pc.get("options", {}).get(k) != v]
            if not changed:
                return None
            if len(changed) == 1:
                return f"click[{changed[0]}]"
    if c == "item_sub_page" and p in ("item_page", "item_sub_page"):
        return f"click[{_sub_page(cur).lower()}]"
    if c == "done" and p == "item_page":
        return "click[buy now]"
    return _no_action(p, c)


def _no_action(prev_page: str, page: str) -> str:
    raise ValueError(f"no WebShop action leads from page '{prev_page}' to page '{page}'")


def read_session_log(path: str | Path, catalog: dict[str, Product]) -> Trajectory:
    """Convert one human-session log into an expert trajectory.

    Args:
        path: A ``all_trajs/*.jsonl`` file.
        catalog: Products by ASIN (:func:`load_catalog`).

    Returns:
        The trajectory; ``score`` is the done page's reward x 100, ``success`` is reward 1.

    Raises:
        RecordError: The log is malformed; the message names the file, line and field.
    """
    path = Path(path)
    entries: list[tuple[int, dict]] = []
    for lineno, entry in iter_json(path):
        if not isinstance(entry, dict):
            raise RecordError(f"{path}:{lineno}: expected a JSON object (one logged page)")
        for key in ("page", "url", "goal"):
            if key not in entry:
                raise RecordError(f"{path}:{lineno}: field '{key}' missing")
        if entry["page"] not in _PAGES:
            raise RecordError(f"{path}:{lineno}: field 'page': unknown page '{entry['page']}'")
        entries.append((lineno, entry))
    if len(entries) < 2 or entries[-1][1]["page"] != "done":
        raise RecordError(f"{path}: a session log must end on the 'done' page (field 'page')")
    steps: list[Step] = []
    for (prev_line, prev), (lineno, cur) in zip(entries, entries[1:], strict=False):
        try:
            action = infer_action(prev, cur)
        except ValueError as err:
            raise RecordError(f"{path}:{lineno}: field 'page': {err}") from err
        if action is None:
            continue
        try:
            observation, available = render_page(prev, catalog)
        except KeyError as err:
            raise RecordError(f"{path}:{prev_line}: field 'content': {err.args[0]!r} not in the catalog") from err
        except ValueError as err:
            raise RecordError(f"{path}:{prev_line}: field 'page': {err}") from err
        steps.append(
            Step(
                observation=observation,
                action=action,
                admissible_actions=available,
                action_admissible=action in available or action.startswith("search["),
                score=0.0,
            )
        )
    done = entries[-1][1]
    reward = float(done.get("reward") or 0.0)
    steps[-1] = steps[-1].model_copy(update={"score": 100 * reward})
    goal = done["goal"]
    return Trajectory(
        trajectory_id=f"webshop/{path.stem}",
        benchmark="webshop",
        task_id=goal.get("asin", path.stem),
        variation=None,
        split="human",
        task_description=goal["instruction_text"],
        steps=steps,
        score=100 * reward,
        success=reward >= 1.0,
        source=SOURCE,
    )


def read_demonstrations(log_dir: str | Path, catalog_path: str | Path) -> list[Trajectory]:
    """Convert every ``*.jsonl`` session log of a folder (sorted by name)."""
    catalog = load_catalog(catalog_path)
    files = sorted(Path(log_dir).glob("*.jsonl"))
    if not files:
        raise RecordError(f"{log_dir}: no *.jsonl session logs")
    return [read_session_log(f, catalog) for f in files]


def available_actions(info: dict) -> list[str]:
    """Our action list from ``WebAgentTextEnv.get_available_actions()`` ({has_search_bar, clickables})."""
    actions = [SEARCH_ACTION] if info["has_search_bar"] else []
    return actions + [f"click[{c}]" for c in info["clickables"] if c != "search"]


def goal_episodes(split: str, goals: Sequence[int] | None = None) -> list[tuple[str, int]]:
    """Evaluation episodes: human goals 0-499 (the protocol's 500) as ``("goal", index)``."""
    if split != "test":
        raise ValueError(f"unknown WebShop split '{split}'; evaluation uses 'test' (goals 0-499)")
    return [("goal", g) for g in (range(500) if goals is None else goals)]


class EpisodeEnv:
    """The real WebShop text env (needs the user's full WebShop install; see the module docstring)."""

    def __init__(self, cfg) -> None:
        try:
            from web_agent_site.envs import WebAgentTextEnv
        except ImportError as err:
            raise RuntimeError(
                "WebShop evaluation needs a full WebShop install (princeton-nlp/WebShop: web_agent_site, its "
                "product files, search index and spaCy en_core_web_lg) on PYTHONPATH; see README 'WebShop'"
            ) from err
        self.cfg = cfg
        self.env = WebAgentTextEnv(observation_mode="text", human_goals=True)
        self.task_description = ""

    def reset(self, task: str, variation: int) -> Observation:
        """Start the episode of human goal ``variation``."""
        obs, _ = self.env.reset(session=variation)
        self.task_description = self.env.get_instruction_text()
        return self._view(obs, 0.0, False)

    def step(self, action: str) -> Observation:
        """Take one action; WebShop's reward (0-1, at ``click[buy now]``) becomes a 0-100 score."""
        obs, reward, done, _ = self.env.step(action)
        return self._view(obs, 100 * float(reward or 0.0), bool(done))

    def _view(self, obs: str, score: float, done: bool) -> Observation:
        return Observation(
            observation=obs,
            task_description=self.task_description,
            admissible=available_actions(self.env.get_available_actions()),
            score=score,
            done=done,
        )

    def close(self) -> None:
        """Nothing to stop (the env is in-process)."""


# ---- the benchmark protocol (nemo_act/benchmarks/base.py) ------------------------------------------------------
CONFIG = WebShopConfig
LIVE_EXPERT_ACTION = False


def episodes(
    cfg: WebShopConfig, split: str, tasks: Sequence[str] | None, max_variations: int | None
) -> list[tuple[str, int]]:
    """Human goals 0-499 (``tasks``: goal indices)."""
    return goal_episodes(split, [int(t) for t in tasks] if tasks else None)


def env_factory(cfg: WebShopConfig, expert: bool) -> Callable[[], EpisodeEnv]:
    """Builds one WebShop text env (a full WebShop install)."""
    return functools.partial(EpisodeEnv, cfg)


def read_experts(cfg: WebShopConfig, split: str) -> tuple[list[Trajectory], dict[str, Any]]:
    """The human demonstrations as trajectories, and what they were read from (for the manifest)."""
    if split != "human":
        raise ValueError(f"WebShop experts come from the human demonstrations: use --split human (got '{split}')")
    root = cfg.data_dir or os.environ.get("WEBSHOP_DATA")
    if not root:
        raise FileNotFoundError("WebShop data not set: pass --data-dir (or set benchmark.data_dir / WEBSHOP_DATA)")
    logs, catalog = Path(root) / cfg.demonstrations, Path(root) / cfg.catalog
    return read_demonstrations(logs, catalog), {"demonstrations": str(logs), "catalog": str(catalog)}
