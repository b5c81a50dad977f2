"""The rules the layout keeps (docs/architecture.md), checked on the source: a rule that is not checked drifts.

* The engine boundary: outside ``nemo_act/engines/`` no module imports an engine's package
  (``nemo_act.engines.local``, ``nemo_act.engines.nemo_rl``) or branches on an engine's name; they go through
  :func:`nemo_act.engines.engine_for` and the :class:`~nemo_act.engines.Engine` methods.
* Every engine named in the schema's ``engine.name`` is registered, and each registered one implements every
  abstract method.
* No circle of imports between modules (any import, at the top or inside a function: a lazy import hides a circle,
  it does not remove it), but for the ones :data:`KNOWN_CIRCLES` lists, which issue 37 still has to remove: a new
  one fails.
"""

import ast
import typing
from pathlib import Path

import pytest

from nemo_act.config.schema import EngineConfig
from nemo_act.engines import ENGINES, Engine
from nemo_act.stage_kinds import load

PACKAGE = Path(__file__).resolve().parents[1] / "nemo_act"
ENGINE_NAMES = typing.get_args(EngineConfig.model_fields["name"].annotation)


def _core_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "engines" not in p.relative_to(PACKAGE).parts)


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        if any(n.startswith(tuple(f"nemo_act.engines.{e}" for e in ENGINE_NAMES)) for n in names):
            out.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: imports an engine's package")
        if isinstance(node, ast.Compare):
            consts = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            attrs = [ast.unparse(c) for c in [node.left, *node.comparators] if isinstance(c, ast.Attribute)]
            if set(consts) & set(ENGINE_NAMES) and any(a.endswith("engine.name") for a in attrs):
                out.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: branches on the engine's name")
    return out


# Circles left to remove (issue 37): the config schema's validators call the stage-kind registry and the benchmark
# protocol, which import the schema's types; the NeMo-RL engine's package re-exports modules that import it back.
KNOWN_CIRCLES = [
    ["nemo_act.benchmarks.base", "nemo_act.config.schema", "nemo_act.stage_kinds"],
    ["nemo_act.engines.nemo_rl", "nemo_act.engines.nemo_rl.launch", "nemo_act.engines.nemo_rl.preflight"],
]


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (any ``import``/``from ... import`` in its file)."""
    mods = {}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        mods[name] = path

    def module_of(dotted: str) -> str | None:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target.split(".")[0] == package.name and (m := module_of(target)) and m != name:
                    graph[name].add(m)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan), each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                out.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_new_circle_of_imports():
    assert circles(import_graph(PACKAGE)) == KNOWN_CIRCLES


def test_the_circle_check_finds_a_planted_circle(tmp_path):
    pkg = tmp_path / "nemo_act"
    (pkg / "evaluation").mkdir(parents=True)
    (pkg / "evaluation" / "pool.py").write_text("def make():\n    from nemo_act.evaluation.ray import Ray\n")
    (pkg / "evaluation" / "ray.py").write_text("from nemo_act.evaluation.pool import make\n")
    (pkg / "cli.py").write_text("import nemo_act.evaluation.pool\n")
    assert circles(import_graph(pkg)) == [["nemo_act.evaluation.pool", "nemo_act.evaluation.ray"]]


def test_no_core_module_imports_an_engine_or_branches_on_its_name():
    offences = [o for p in _core_modules() for o in _offences(p)]
    assert offences == [], "\n".join(offences)


def test_the_check_catches_what_it_looks_for(tmp_path):
    bad = tmp_path / "nemo_act" / "bad.py"
    bad.parent.mkdir()
    bad.write_text(
        "from nemo_act.engines.nemo_rl import interpreters\n"
        "import nemo_act.engines.local.stages\n"
        "def f(cfg):\n    return cfg.engine.name == 'nemo_rl'\n"
    )
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "nemo_act"
    try:
        found = _offences(bad)
    finally:
        PACKAGE = saved
    reasons = [o.split(": ", 1)[1] for o in found]
    assert reasons == ["imports an engine's package"] * 2 + ["branches on the engine's name"]


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_every_engine_of_the_schema_is_registered_and_complete(name):
    engine = load(ENGINES[name])
    assert isinstance(engine, Engine) and engine.name == name
    assert not getattr(type(engine), "__abstractmethods__", None)
