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

**The real env** is WebShop's own ``WebAgentTextEnv`` (``observation_mode="text"``) from the user's WebShop
checkout (``benchmark.webshop_dir`` / ``$WEBSHOP_DIR``: its ``web_agent_site``, ``data/`` and ``search_engine``
index; ``nemo-act webshop-setup`` prepares one), in one of two protocols (``benchmark.protocol``, recorded in
every manifest through the benchmark block):

* ``full`` (the paper's): human goals 0-499 of the full catalog are the test set; experts are the human
  demonstrations. It needs the full download (``data/items_shuffle.json``, ``items_ins_v2.json``) and refuses
  the 1,000-product catalog, which holds the human goals of 13 products only.
* ``small`` (what runs anywhere, as verl-agent's WebShop setup does): ``num_products=1000`` and WebShop's
  synthetic goals (6,910 on that catalog, shuffled by WebShop with its fixed seed 233), split by goal index
  (``benchmark.small_splits``: test 0-499 as verl-agent's evaluation, dev 500-999, train from 1000), plus the
  ``human`` split: the human goals that exist for those products. Experts are played in the env by a gold
  policy that follows the goal (:func:`play_expert`). Its results are WebShop-small's, never the paper's.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_act.benchmarks import webshop_setup
from nemo_act.benchmarks.base import Observation
from nemo_act.benchmarks.webshop_setup import FULL_FILES
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
PAPER_COLUMNS = (  # the paper's number is the full protocol's (500 human goals), not the small one's
    {"key": "webshop", "label": "WebShop success %", "split": "test", "metric": "completion", "order": 2,
     "protocol": {"protocol": "full"}},
)  # fmt: skip


class WebShopConfig(BenchmarkConfigBase):
    """WebShop: human-demonstration reader, and WebShop's own text env from the user's checkout."""

    name: Literal["webshop"]
    protocol: Literal["full", "small"] = Field(
        description="full: the paper's (human goals 0-499, full catalog, human demonstrations); small: 1,000 "
        "products, synthetic goals split by small_splits, experts played by the gold policy."
    )
    webshop_dir: str | None = Field(description="The user's WebShop checkout (None: $WEBSHOP_DIR, else on the path).")
    small_splits: dict[str, tuple[int, int]] = Field(
        description="small protocol: split -> [first, end) goal indices of WebShop's synthetic goals."
    )
    data_dir: str | None = Field(description="WebShop folder (None: $WEBSHOP_DATA).")

    @model_validator(mode="before")
    @classmethod
    def _small_has_its_own_title(cls, value: Any) -> Any:
        """The small protocol's results go under a title of their own: tables never mix them with the paper's."""
        if isinstance(value, dict) and value.get("protocol") == "small" and value.get("title") == "WebShop":
            value = {**value, "title": "WebShop-small"}
        return value

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
    """The full protocol's evaluation episodes: human goals 0-499 (the protocol's 500) as ``("goal", index)``."""
    if split != "test":
        raise ValueError(f"unknown WebShop split '{split}'; evaluation uses 'test' (goals 0-499)")
    return [("goal", g) for g in (range(500) if goals is None else goals)]


def small_episodes(
    cfg: WebShopConfig, split: str, goals: Sequence[int] | None, max_variations: int | None
) -> list[tuple[str, int]]:
    """The small protocol's episodes.

    ``("goal", i)`` for synthetic goal ``i`` of the split's range (the first ``max_variations`` of it when set),
    ``("human", i)`` for the ``human`` split (its size is the env's).
    """
    if split == "human":
        if goals is None:
            raise ValueError("WebShop small protocol, split 'human': name the goals (tasks: their indices)")
        return [("human", g) for g in goals]
    if split not in cfg.small_splits:
        raise ValueError(
            f"unknown WebShop split '{split}' (benchmark.small_splits: {', '.join(cfg.small_splits)}, or human)"
        )
    first, end = cfg.small_splits[split]
    if goals is not None:
        outside = [g for g in goals if not first <= g < end]
        if outside:
            raise ValueError(f"WebShop goals {outside} are not in split '{split}' (goals {first}-{end - 1})")
        return [("goal", g) for g in goals]
    indices = range(first, end if max_variations is None else min(end, first + max_variations))
    return [("goal", g) for g in indices]


def webshop_root(cfg: WebShopConfig) -> Path | None:
    """The user's WebShop checkout (``benchmark.webshop_dir``, else ``$WEBSHOP_DIR``), None where neither is set.

    Raises:
        FileNotFoundError: The folder named holds no ``web_agent_site`` (not a WebShop checkout).
    """
    root = cfg.webshop_dir or os.environ.get("WEBSHOP_DIR")
    if not root:
        return None
    path = Path(root).expanduser().resolve()
    if not (path / "web_agent_site").is_dir():
        raise FileNotFoundError(
            f"benchmark.webshop_dir / WEBSHOP_DIR = {root}: no web_agent_site/ there (a checkout of WebShop, "
            "princeton-nlp/WebShop; docs/benchmarks.md 'WebShop')"
        )
    return path


GOAL_SEED = 233  # WebShop's own goal-shuffle seed, also taken for the price caps it draws before


def _text_env_class(cfg: WebShopConfig) -> type:
    """WebShop's ``WebAgentTextEnv``, imported from the user's checkout (put first on this process's path)."""
    root = webshop_root(cfg)
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        from web_agent_site.envs import WebAgentTextEnv
    except (ImportError, OSError) as err:  # OSError: spaCy's "Can't find model 'en_core_web_sm'"
        where = f"the WebShop checkout {root}" if root else "the path (set benchmark.webshop_dir or WEBSHOP_DIR)"
        raise RuntimeError(
            f"WebShop's text env does not import from {where}: {err}. It needs WebShop's packages (pyserini, "
            "spaCy with en_core_web_sm, flask, bs4, cleantext, rank_bm25, thefuzz, gym) and a prepared checkout "
            "(nemo-act webshop-setup); docs/benchmarks.md 'WebShop'"
        ) from err
    return WebAgentTextEnv


def _server_kwargs(cfg: WebShopConfig, goals: str) -> dict[str, Any]:
    """``WebAgentTextEnv`` arguments of a goal set: ``goal`` (the protocol's) or ``human`` (small's human goals).

    Raises:
        FileNotFoundError: The full protocol on a checkout without the full catalog, saying why and what to use.
    """
    if cfg.protocol == "small":
        return {"num_products": 1000, "human_goals": goals == "human"}
    root = webshop_root(cfg)
    if root is not None:
        data = root / "data"
        missing = [name for name in FULL_FILES if not (data / name).is_file()]
        if missing:
            raise FileNotFoundError(
                f"benchmark.protocol=full reads human goals 0-499 of the full catalog, and {data} lacks "
                f"{', '.join(missing)}; the 1,000-product catalog holds the human goals of 13 products only, so "
                "goals 0-499 do not exist there: use benchmark.protocol=small, or prepare the full download "
                "(nemo-act webshop-setup --protocol full)"
            )
        return {"human_goals": True, "file_path": str(data / FULL_FILES[0])}
    return {"human_goals": True}


class EpisodeEnv:
    """WebShop's own text env (the user's checkout; see the module docstring), one per goal set it is asked for."""

    def __init__(self, cfg: WebShopConfig) -> None:
        self.cfg = cfg
        self._cls = _text_env_class(cfg)
        self._envs: dict[str, Any] = {}
        self.env: Any = None
        self.task_description = ""

    def _env_for(self, goals: str) -> Any:
        if goals not in self._envs:
            kwargs = _server_kwargs(self.cfg, goals)
            if "file_path" in kwargs:  # the full catalog's attributes: WebShop reads them from a module constant
                import web_agent_site.engine.engine as engine

                engine.DEFAULT_ATTR_PATH = str(Path(kwargs["file_path"]).with_name(FULL_FILES[1]))
            # WebShop draws each synthetic goal's price cap from Python's global `random` before it seeds it
            # (web_agent_site/engine/goal.py:76-81, seed(233) only after, envs/web_agent_text_env.py:334-336):
            # seeded here first, goal i has the same instruction in every process (experts, workers, reruns)
            random.seed(GOAL_SEED)
            self._envs[goals] = self._cls(observation_mode="text", **kwargs)
        return self._envs[goals]

    def goals(self, task: str) -> list[dict[str, Any]]:
        """The goal list a task's episodes index (WebShop's, after its own fixed shuffle)."""
        return self._env_for(task).server.goals

    def reset(self, task: str, variation: int) -> Observation:
        """Start the episode of goal ``variation`` (``task``: ``goal``, or ``human`` for small's human goals)."""
        self.env = self._env_for(task if self.cfg.protocol == "small" else "goal")
        count = len(self.env.server.goals)
        if not 0 <= variation < count:
            raise IndexError(
                f"WebShop ({self.cfg.protocol} protocol, {task} goals) has goals 0-{count - 1}, not {variation}"
            )
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


GOLD = "webshop-gold"
MAX_RESULT_PAGES = 5  # SEARCH_RETURN_N 50 results, 10 a page (engine.py: SEARCH_RETURN_N, PRODUCT_WINDOW)


def _gold_queries(goal: dict[str, Any]) -> list[str]:
    """What the gold policy searches, in turn: the instruction as given, then the product's own title."""
    return list(dict.fromkeys(q for q in (goal["instruction_text"], str(goal.get("name") or "")) if q.strip()))


def play_gold(env: EpisodeEnv, task: str, variation: int, split: str, max_steps: int) -> tuple[Trajectory, str]:
    """Play one goal with the gold policy: search, open the goal's product, choose its options, buy.

    Searches the instruction, then the product's title, paging through the results (``next >``) until the goal's
    product is listed; then clicks it, each of the goal's option values, and ``buy now``. Every step records the
    env's own observation and available actions.

    Returns:
        The trajectory (``success``: WebShop's reward 1.0) and the outcome: ``bought``, ``not_found`` (no search
        listed the product), ``option_not_listed`` (a goal option the item page does not offer), ``step_cap``.
    """
    obs = env.reset(task, variation)
    goal = env.goals(task)[variation]
    steps: list[Step] = []

    def take(action: str) -> None:
        nonlocal obs
        listed = action in obs.admissible or (action.startswith("search[") and SEARCH_ACTION in obs.admissible)
        before = obs
        obs = env.step(action)
        steps.append(Step(observation=before.observation, action=action, admissible_actions=before.admissible,
                          action_admissible=listed, score=obs.score))  # fmt: skip

    def trajectory() -> Trajectory:
        return Trajectory(
            trajectory_id=f"webshop/{task}/{variation}", benchmark="webshop", task_id=task, variation=variation,
            split=split, task_description=env.task_description, steps=steps or [Step(
                observation=obs.observation, action="(none)", admissible_actions=obs.admissible,
                action_admissible=False)],
            score=obs.score, success=obs.done and obs.score >= 100.0, source=GOLD,
        )  # fmt: skip

    product = f"click[{goal['asin'].lower()}]"
    for query in _gold_queries(goal):
        if steps:
            take("click[back to search]")
        take(f"search[{query}]")
        for _ in range(MAX_RESULT_PAGES - 1):
            if product in obs.admissible or "click[next >]" not in obs.admissible:
                break
            take("click[next >]")
        if product in obs.admissible:
            break
    if product not in obs.admissible:
        return trajectory(), "not_found"
    take(product)
    for value in (goal.get("goal_options") or {}).values():
        option = f"click[{str(value).lower()}]"
        if option not in obs.admissible:
            return trajectory(), "option_not_listed"
        take(option)
    take("click[buy now]")
    if len(steps) > max_steps:
        return trajectory(), "step_cap"
    return trajectory(), "bought"


# ---- the benchmark protocol (nemo_act/benchmarks/base.py) ------------------------------------------------------
CONFIG = WebShopConfig
LIVE_EXPERT_ACTION = False


def add_commands(sub: Any) -> None:
    """The subcommand WebShop's data needs: ``nemo-act webshop-setup`` (:mod:`.webshop_setup`)."""
    webshop_setup.add_command(sub)


def episodes(
    cfg: WebShopConfig, split: str, tasks: Sequence[str] | None, max_variations: int | None
) -> list[tuple[str, int]]:
    """full: human goals 0-499; small: the split's synthetic goals (``tasks``: goal indices, both)."""
    goals = [int(t) for t in tasks] if tasks else None
    if cfg.protocol == "small":
        return small_episodes(cfg, split, goals, max_variations)
    return goal_episodes(split, goals)


def plays_live(cfg: WebShopConfig) -> bool:
    """Experts: played in the env by the gold policy (small protocol), else the human demonstrations."""
    return cfg.protocol == "small"


def expert_env(cfg: WebShopConfig) -> EpisodeEnv:
    """The env the gold policy plays in."""
    return EpisodeEnv(cfg)


def play_expert(
    env: EpisodeEnv, cfg: WebShopConfig, task: str, variation: int, split: str
) -> tuple[Trajectory, dict[str, int], int]:
    """One gold-policy episode (:func:`play_gold`) and its outcome counted (``gold_<outcome>``)."""
    traj, outcome = play_gold(env, task, variation, split, cfg.max_steps)
    if outcome == "bought" and not traj.success:
        # the goal's own product with the goal's own options, scored below 1 by WebShop's reward: its option
        # score compares the goal's (name, value) pairs, not the values, with the bought values
        # (web_agent_site/engine/goal.py:238-242), so a value that normalize_color changes ('1877black' ->
        # 'black') never matches; no policy can reach 1.0 on such a goal
        outcome = "own_product_below_1"
    return traj, {f"gold_{outcome}": 1}, 1


def expert_summary(counts: dict[str, Any]) -> list[str]:
    """What ``nemo-act experts`` prints of the gold policy: episodes kept, and why the others were dropped."""
    gold = {k.removeprefix("gold_"): v for k, v in counts.items() if k.startswith("gold_")}
    if not gold:
        return []
    reasons = {
        "not_found": "the search never listed the goal's product",
        "option_not_listed": "a goal option the product page does not offer",
        "step_cap": "over benchmark.max_steps",
        "own_product_below_1": "WebShop's reward scores the goal's own product and options below 1",
    }
    dropped = "; ".join(f"{n} {reasons.get(k, k)}" for k, n in sorted(gold.items()) if k != "bought") or "none"
    return [f"gold policy: {gold.get('bought', 0)} bought at reward 1.0; dropped: {dropped}"]


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
