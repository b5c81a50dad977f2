"""The rules the layout keeps (docs/architecture.md), checked on the source: a rule that is not checked drifts.

* The engine boundary: outside ``nemo_act/engines/`` no module imports an engine's package
  (``nemo_act.engines.local``, ``nemo_act.engines.nemo_rl``) or branches on an engine's name; they go through
  :func:`nemo_act.engines.engine_for` and the :class:`~nemo_act.engines.Engine` methods.
* Every engine named in the schema's ``engine.name`` is registered, and each registered one implements every
  abstract method.
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
