"""The rules the layout keeps (docs/architecture.md), checked on the source: a rule that is not checked drifts.

* The floors: every import (at the top, inside a function, under ``TYPE_CHECKING``: each is a dependency) goes to
  a room on the same floor or one below, in the order docs/architecture.md's "The floors" table gives; a room is a
  subpackage of ``nemo_act`` (each engine's package its own) or a top-level module. Code reaches up only through a
  name the config gives (``nemo_act.common.plugins``), never an import.
* No circle of imports between modules.
* The engine boundary: outside the engines' own packages (``engines/__init__.py`` included) no module imports an
  engine's package, names one in a string (an ``importlib`` path) or branches on an engine's name (a comparison,
  an ``in`` over a tuple, a ``match``); they go through :func:`nemo_act.engines.engine_for` and the
  :class:`~nemo_act.engines.Engine` methods.
* Every engine shipped is complete: its ``ENGINE`` implements every abstract method, its ``CONFIG`` models its
  block.
* No module outside ``nemo_act/benchmarks/`` names a benchmark in its code (an identifier, an import, a string
  that is not a docstring): what a command, a column or a message needs of one comes from its adapter
  (``nemo_act/benchmarks/base.py``). Prose (docstrings, comments) may cite one as an example.
"""

import ast
import re
from pathlib import Path

import pytest
import yaml

from nemo_act.common.plugins import engine_module, import_module
from nemo_act.config.schema import EngineConfigBase
from nemo_act.engines import Engine, engine_named, shipped_engines

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nemo_act"
ENGINE_NAMES = shipped_engines()


def module_names(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package``."""
    return {
        ".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in package.rglob("*.py")
    }


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (any ``import``/``from ... import`` in its file).

    ``from pkg import sub`` where ``sub`` is a module imports ``pkg.sub`` (as import-linter counts it), not ``pkg``'s
    other names.
    """
    mods = module_names(package)

    def module_of(dotted: str) -> str | None:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                targets = subs if all(s in mods for s in subs) else [node.module, *subs]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target.split(".")[0] == package.name and (m := module_of(target)) and m != name:
                    graph[name].add(m)
    return graph


def room(module: str) -> str:
    """The room of a module: its top-level module or subpackage; an engine's package is a room of its own."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    return ".".join(parts[:2]) if parts[0] == "engines" and len(parts) > 1 else parts[0]


def floors(doc: Path) -> dict[str, int]:
    """Room -> floor, from the table under "## The floors" (``| floor | rooms | ... |``, rooms in backticks)."""
    text = doc.read_text()
    section = text.split("## The floors", 1)[1].split("\n## ", 1)[0]
    out: dict[str, int] = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if m:
            for name in re.findall(r"`([^`]+)`", m.group(2)):
                assert name not in out, f"{doc}: room {name} is on two floors"
                out[name] = int(m.group(1))
    return out


def back_up(graph: dict[str, set[str]], floor: dict[str, int]) -> list[str]:
    """Every import that goes to a higher floor, and every room the floors do not list."""
    rooms = {room(m) for m in graph}
    out = [f"room {r} is on no floor of docs/architecture.md" for r in sorted(rooms - set(floor))]
    out += [f"docs/architecture.md lists {r}, which is no room" for r in sorted(set(floor) - rooms)]
    for a in sorted(graph):
        for b in sorted(graph[a]):
            fa, fb = floor.get(room(a)), floor.get(room(b))
            if fa is not None and fb is not None and fb > fa:
                out.append(f"{a} (floor {fa}) imports {b} (floor {fb})")
    return out


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


def test_every_import_goes_down_the_floors_of_the_architecture_page():
    assert back_up(import_graph(PACKAGE), floors(ROOT / "docs" / "architecture.md")) == []


def test_the_module_map_names_every_room():
    """docs/architecture.md's module map (its first column) names each room, as a folder or a module."""
    section = (ROOT / "docs" / "architecture.md").read_text().split("## The module map", 1)[1].split("\n## ", 1)[0]
    named = [
        n
        for line in section.splitlines()
        if line.startswith("| `")
        for n in re.findall(r"`([^`]+)`", line.split("|")[1])
    ]
    rooms = {room(m) for m in import_graph(PACKAGE)} - {"__init__"}
    missing = [r for r in rooms if not any(n == f"{r}.py" or n.startswith(r.replace(".", "/") + "/") for n in named)]
    assert sorted(missing) == []


def test_the_module_map_names_every_module():
    """docs/architecture.md's module map names every module of the package by its file (a room's own row names the
    files in it): a module added without a word on where it sits fails here."""
    section = (ROOT / "docs" / "architecture.md").read_text().split("## The module map", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([^`]+)`", section))
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if path.name == "__init__.py" or "examples" in rel.parts:
            continue
        if not ({rel.as_posix(), path.name, f"{rel.parent.as_posix()}/*.py"} & named):
            missing.append(rel.as_posix())
    assert missing == []


def test_the_floor_check_finds_an_import_back_up(tmp_path):
    pkg = tmp_path / "nemo_act"
    (pkg / "config").mkdir(parents=True)
    (pkg / "config" / "schema.py").write_text("def f():\n    from nemo_act.benchmarks.base import adapter\n")
    (pkg / "benchmarks").mkdir()
    (pkg / "benchmarks" / "base.py").write_text("from nemo_act.config.schema import f\n")
    (pkg / "cli.py").write_text("import nemo_act.config.schema\n")
    doc = tmp_path / "architecture.md"
    doc.write_text("## The floors\n\n| floor | rooms |\n|---|---|\n| 0 | `config` |\n| 1 | `benchmarks`, `cli` |\n")
    assert back_up(import_graph(pkg), floors(doc)) == [
        "nemo_act.config.schema (floor 0) imports nemo_act.benchmarks.base (floor 1)"
    ]
    doc.write_text("## The floors\n\n| floor | rooms |\n|---|---|\n| 0 | `config` |\n| 1 | `benchmarks` |\n")
    assert back_up(import_graph(pkg), floors(doc))[0] == "room cli is on no floor of docs/architecture.md"


def test_no_circle_of_imports():
    assert circles(import_graph(PACKAGE)) == []


def test_the_circle_check_finds_a_planted_circle(tmp_path):
    pkg = tmp_path / "nemo_act"
    (pkg / "evaluation").mkdir(parents=True)
    (pkg / "evaluation" / "pool.py").write_text("def make():\n    from nemo_act.evaluation.ray import Ray\n")
    (pkg / "evaluation" / "ray.py").write_text("from nemo_act.evaluation.pool import make\n")
    (pkg / "cli.py").write_text("import nemo_act.evaluation.pool\n")
    assert circles(import_graph(pkg)) == [["nemo_act.evaluation.pool", "nemo_act.evaluation.ray"]]


def _names_engine(node: ast.AST) -> bool:
    """A string constant that is an engine's name, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in ENGINE_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_engine(e) for e in node.elts)
    return False


def _about_the_engine(node: ast.AST) -> bool:
    """An expression that reads the engine's name (``cfg.engine.name``, ``engine.name``, ``engine_name``)."""
    text = ast.unparse(node)
    return text.endswith(("engine.name", "engine_name"))


def offences(path: Path, package: Path) -> list[str]:
    """Where a module outside the engines' packages imports, names or branches on a shipped engine."""
    where = path.relative_to(package.parent)
    packages = tuple(f"{package.name}.engines.{e}" for e in ENGINE_NAMES)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        if any(n == p or n.startswith(p + ".") for n in names for p in packages):
            out.append(f"{where}:{node.lineno}: imports an engine's package")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if any(node.value == p or node.value.startswith((p + ".", p + ":")) for p in packages):
                out.append(f"{where}:{node.lineno}: names an engine's package in a string")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_about_the_engine(s) for s in sides) and any(_names_engine(s) for s in sides):
                out.append(f"{where}:{node.lineno}: branches on the engine's name")
        elif isinstance(node, ast.Match) and _about_the_engine(node.subject):
            values = [p for c in node.cases for p in ast.walk(c.pattern) if isinstance(p, ast.MatchValue)]
            if any(_names_engine(v.value) for v in values):
                out.append(f"{where}:{node.lineno}: branches on the engine's name")
    return out


def _outside_the_engines(package: Path) -> list[Path]:
    engines = package / "engines"
    return sorted(p for p in package.rglob("*.py") if p.parent == engines or engines not in p.parents)


def test_no_module_outside_the_engines_imports_names_or_branches_on_one():
    assert PACKAGE / "engines" / "__init__.py" in _outside_the_engines(PACKAGE)
    found = [o for p in _outside_the_engines(PACKAGE) for o in offences(p, PACKAGE)]
    assert found == [], "\n".join(found)


def test_the_engine_check_catches_every_form(tmp_path):
    pkg = tmp_path / "nemo_act"
    (pkg / "engines").mkdir(parents=True)
    (pkg / "engines" / "__init__.py").write_text('ENGINES = {"x": "nemo_act.engines.nemo_rl:ENGINE"}\n')
    (pkg / "bad.py").write_text(
        "from nemo_act.engines.nemo_rl import interpreters\n"
        "import nemo_act.engines.local.stages\n"
        "import importlib\n"
        "def f(cfg):\n"
        "    importlib.import_module('nemo_act.engines.local')\n"
        "    if cfg.engine.name == 'nemo_rl':\n        return 1\n"
        "    if cfg.engine.name in ('local', 'other'):\n        return 2\n"
        "    match cfg.engine.name:\n        case 'nemo_rl':\n            return 3\n"
    )
    found = [o.split(": ", 1) for p in _outside_the_engines(pkg) for o in offences(p, pkg)]
    assert sorted((w.split(":")[0].split("/")[-1], why) for w, why in found) == [
        ("__init__.py", "names an engine's package in a string"),
        ("bad.py", "branches on the engine's name"),
        ("bad.py", "branches on the engine's name"),
        ("bad.py", "branches on the engine's name"),
        ("bad.py", "imports an engine's package"),
        ("bad.py", "imports an engine's package"),
        ("bad.py", "names an engine's package in a string"),
    ]


def test_grep_finds_no_engine_in_the_config_and_the_engine_interface():
    """The issue's own check: ``grep -n nemo_rl nemo_act/config nemo_act/engines/__init__.py`` finds nothing."""
    files = [*sorted((PACKAGE / "config").glob("*.py")), PACKAGE / "engines" / "__init__.py"]
    hits = [f"{p}:{i}" for p in files for i, line in enumerate(p.read_text().splitlines(), 1) if "nemo_rl" in line]
    assert hits == []


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_every_shipped_engine_is_complete(name):
    engine = engine_named(name)
    assert isinstance(engine, Engine) and engine.name == name
    assert not getattr(type(engine), "__abstractmethods__", None)
    assert issubclass(import_module(engine_module(name), "test").CONFIG, EngineConfigBase)


def benchmark_names() -> re.Pattern[str]:
    """The shipped benchmarks' names, titles and adapter modules (``conf/benchmark/*.yaml``), as one pattern.

    Separators inside a name are free (``textworld_express``, ``TextWorld-Express``); a name that is an everyday
    word (``traces``) counts as a whole word only, the others also inside a longer identifier
    (``cmd_webshop_setup``).
    """
    stems, words = set(), set()
    for path in (ROOT / "conf" / "benchmark").glob("*.yaml"):
        raw = yaml.safe_load(path.read_text())
        for name in (raw["name"], raw["title"], raw["adapter"].rsplit(".", 1)[-1]):
            parts = re.split(r"[-_ ]", name.lower())
            (words if name.lower() in EVERYDAY else stems).add("[-_ ]?".join(map(re.escape, parts)))
    return re.compile(rf"(?i)(?<![a-z])({'|'.join(sorted(stems))})|(?<![a-z])({'|'.join(sorted(words))})(?![a-z])")


EVERYDAY = {"traces", "agent traces"}


def benchmarks_named(package: Path, pattern: re.Pattern[str]) -> list[str]:
    """``file:line: text`` of every name in code outside ``benchmarks/`` that matches ``pattern``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] == "benchmarks":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            texts: list[str] = []
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                texts = [node.value]
            elif isinstance(node, ast.Name):
                texts = [node.id]
            elif isinstance(node, ast.Attribute):
                texts = [node.attr]
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                texts = [node.name]
            elif isinstance(node, ast.arg | ast.keyword) and node.arg:
                texts = [node.arg]
            elif isinstance(node, ast.Import | ast.ImportFrom):
                texts = [getattr(node, "module", None) or "", *(a.name for a in node.names)]
            found += [
                f"{path.relative_to(package.parent)}:{node.lineno}: {t[:80]!r}" for t in texts if pattern.search(t)
            ]
    return found


def test_no_module_outside_the_adapters_names_a_benchmark():
    """Issue 47: a new benchmark is one module and one YAML; nothing else in the package knows the shipped ones."""
    pattern = benchmark_names()
    for name in ("ScienceWorld", "webshop_setup", "textworld_express", "TextWorld-Express", "ALFWORLD", "traces"):
        assert pattern.search(name), name
    for name in ("retraces", "trace", "web", "world", "science"):
        assert not pattern.search(name), name
    assert benchmarks_named(PACKAGE, pattern) == []


def test_the_benchmark_name_check_finds_a_planted_name(tmp_path):
    pkg = tmp_path / "nemo_act"
    (pkg / "report").mkdir(parents=True)
    (pkg / "benchmarks").mkdir()
    (pkg / "benchmarks" / "webshop.py").write_text('TITLE = "WebShop"\n')  # an adapter may name itself
    (pkg / "report" / "table.py").write_text(
        '"""Columns, e.g. ScienceWorld\'s score (prose may cite one)."""\n\n'
        "def columns():\n"
        '    """The columns."""\n'
        '    return {"key": "alfworld_ood", "label": "OOD success"}  # ALFWorld (a comment may too)\n'
    )
    (pkg / "cli.py").write_text("from nemo_act.benchmarks.webshop_setup import prepare\n")
    assert benchmarks_named(pkg, benchmark_names()) == [
        "nemo_act/cli.py:1: 'nemo_act.benchmarks.webshop_setup'",
        "nemo_act/report/table.py:5: 'alfworld_ood'",
    ]


def test_the_command_line_starts_without_a_heavy_dependency():
    """Issue 47: imports are at the top of modules but for the heavy ones pyproject.toml lists (ruff TID253), so
    importing the CLI, which imports the whole core, loads none of them (``nemo-act --help`` stays fast)."""
    import subprocess
    import sys
    import tomllib

    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    heavy = ruff["flake8-tidy-imports"]["banned-module-level-imports"]
    assert {"torch", "ray", "nemo_rl", "numpy", "nemo_act.engines.local.stages"} <= set(heavy)
    assert {"PLC0415", "TID253", "C901"} <= set(ruff["select"]) and ruff["mccabe"]["max-complexity"] == 15
    code = "import sys, nemo_act.cli; print(' '.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    assert "nemo_act.run.pipeline" in loaded and sorted(set(heavy) & loaded) == []
