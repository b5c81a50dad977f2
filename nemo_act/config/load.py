"""Compose, override and validate configs (OmegaConf YAML with ``defaults:`` lists).

A ``defaults:`` list entry is one of:

* ``{group: option}``: load ``<group>/<option>.yaml`` from the config search path and merge it under key
  ``group`` (Hydra-style groups: model, benchmark, generation, engine, ...);
* ``"parent.yaml"``: a file path relative to the current file, merged at the same level
  (NeMo-RL-style inheritance, used by recipes); a later ``group: option`` entry replaces the
  parent's choice for that group (one option per group, as in Hydra). Where no such file lies next to it,
  the same path is looked up in the search path (a user's ``pipeline/mine.yaml`` with ``../config.yaml``
  inherits the packaged root config; a file naming itself extends the next folder's file of that name);
* ``_self_``: where the file's own keys are merged (last when absent, so a file overrides its parents).

A group option may hold a ``_global_`` block (Hydra's ``@package _global_``, for one block): keys at the
root of the config, merged after every file and before the command line's overrides (``train=smoke`` also
shrinks the data steps' generation and evaluation).

The config search path (:func:`nemo_act.common.paths.conf_roots`) is ``$NEMO_ACT_CONF``'s folders, then the
packaged ``conf/``: every lookup (root config, group options, parent files, a pipeline path that is not
a file from the working directory) takes the first folder holding the file, so a user's folder holds only
its own files.

Overrides ``group=option`` switch a group's option; ``a.b.c=value`` sets a key (YAML-typed value).
The composed tree is validated against :class:`~nemo_act.config.schema.ExperimentConfig`; any
missing, unknown or mistyped key raises :class:`ConfigError` naming the config file and the key.

We do not use Hydra itself: hydra-core 1.3 pins ``omegaconf<2.4`` and takes over the process
(working dir, logging), while NeMo-RL-style recipes only need this small composition step.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from pydantic import ValidationError

from nemo_act import stage_kinds
from nemo_act.common.paths import conf_root, conf_roots, find_conf  # noqa: F401  (conf_root re-exported)
from nemo_act.common.plugins import config_class, import_module
from nemo_act.config.schema import BenchmarkConfigBase, ExperimentConfig
from nemo_act.stage_kinds import import_extensions


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the file and the key."""


def group_options(group: str) -> list[str]:
    """List the options of a config group (``<group>/*.yaml`` in every search folder, ``_*`` files excluded)."""
    names = {p.stem for root in conf_roots() for p in (root / group).glob("*.yaml") if not p.name.startswith("_")}
    return sorted(names)


def _is_group(name: str) -> bool:
    return any((root / name).is_dir() for root in conf_roots())


def _within(path: Path) -> tuple[int, Path] | None:
    """(index in the search path, path relative to it) of a file inside a config folder, else None."""
    for i, root in enumerate(conf_roots()):
        if path.is_relative_to(root):
            return i, path.relative_to(root)
    return None


def _parent_file(path: Path, entry: str) -> Path:
    """The file a ``defaults`` file entry of ``path`` names (see the module docstring)."""
    near = (path.parent / entry).resolve()
    inside = _within(path)
    if near.is_file() and near != path or inside is None:
        return near
    index, _ = inside
    home = conf_roots()[index]
    if not near.is_relative_to(home):
        return near
    relative = near.relative_to(home)
    later = conf_roots()[index + 1 :] if near == path else conf_roots()
    for root in later:
        if (root / relative).is_file() and (root / relative) != path:
            return root / relative
    return near


def resolve_config_path(path: str | Path) -> Path:
    """A config file given on the command line: from the working directory, else through the search path.

    ``conf/pipeline/act_il.yaml`` and ``pipeline/act_il.yaml`` both name the packaged pipeline from any folder.

    Raises:
        ConfigError: No folder holds it (the message lists where it looked).
    """
    given = Path(path)
    if given.is_file():
        return given.resolve()
    if not given.is_absolute():
        tries = [given] + ([Path(*given.parts[1:])] if given.parts[0] == "conf" and len(given.parts) > 1 else [])
        for relative in tries:
            found = find_conf(relative)
            if found is not None:
                return found
    raise ConfigError(
        f"{path}: config file not found (looked in the working directory and in {', '.join(map(str, conf_roots()))})"
    )


def _read_yaml(path: Path) -> DictConfig:
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML: {err}") from err
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return OmegaConf.create(data)


def _without(part: DictConfig, key: str) -> DictConfig:
    """A copy of ``part`` without top-level ``key``."""
    if key not in part:
        return part
    out = part.copy()
    del out[key]
    return out


def _root_config(name: str = "config.yaml") -> Path:
    """A config file of the search path itself (never the working directory's file of that name)."""
    found = find_conf(name)
    if found is None:
        raise ConfigError(f"{name}: not found in the config search path {', '.join(map(str, conf_roots()))}")
    return found


def _compose(
    path: Path, choices: dict[str, str], top: bool, lifted: list[DictConfig], used: set[str] | None = None
) -> DictConfig:
    """Load ``path`` and merge its defaults list in order; a group option's ``_global_`` block goes to ``lifted``."""
    node = _read_yaml(path)
    if "_global_" in node:
        lifted.append(node.pop("_global_"))
    defaults = node.pop("defaults", [])
    if isinstance(defaults, str):
        defaults = [defaults]
    if not isinstance(defaults, ListConfig | list):
        raise ConfigError(f"{path}: field 'defaults' must be a list")
    parts: list[DictConfig] = []
    self_seen = False
    for entry in defaults:
        if entry == "_self_":
            parts.append(node)
            self_seen = True
        elif isinstance(entry, str):
            # a parent file is part of the same config: group switches apply to its defaults too
            parts.append(_compose(_parent_file(path, entry), choices, top, lifted, used))
        elif isinstance(entry, DictConfig) and len(entry) == 1:
            group, option = next(iter(entry.items()))
            if top and group in choices:  # a CLI switch wins over every entry of its group
                option = choices[group]
                if used is not None:
                    used.add(group)
            option_file = find_conf(f"{group}/{option}.yaml")
            if option_file is None:
                raise ConfigError(
                    f"{path}: defaults entry '{group}: {option}': no file {group}/{option}.yaml in "
                    f"{', '.join(map(str, conf_roots()))}; options of '{group}' are: "
                    f"{', '.join(group_options(group)) or '(none)'}"
                )
            sub = _compose(option_file, {}, False, lifted)
            # a group holds one option: this entry replaces what a parent file chose for the group
            # (Hydra semantics; merging would keep keys of the other option, e.g. ScienceWorld's in ALFWorld)
            parts = [_without(p, group) if p is not node else p for p in parts]
            parts.append(OmegaConf.create({group: sub}))
        else:
            raise ConfigError(f"{path}: defaults entry {entry!r} is neither 'group: option', a file nor _self_")
    if not self_seen:
        parts.append(node)
    return OmegaConf.merge(*parts) if parts else node


def _split_overrides(overrides: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Separate ``group=option`` switches from dotted key overrides."""
    choices: dict[str, str] = {}
    dotted: list[str] = []
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}': expected key=value (e.g. pairs.k=4 or model=qwen3_8b)")
        key, value = item.split("=", 1)
        key = key.strip().lstrip("+")
        if "." not in key and _is_group(key):
            if find_conf(f"{key}/{value}.yaml") is None:
                raise ConfigError(
                    f"override '{item}': no option '{value}' in group '{key}'; "
                    f"options are: {', '.join(group_options(key))}"
                )
            choices[key] = value
        else:
            dotted.append(f"{key}={value}")
    return choices, dotted


def _format_validation(err: ValidationError, source: str, tree: dict[str, Any]) -> str:
    lines = [f"{source}: invalid config ({err.error_count()} error(s)):"]
    for e in err.errors():
        loc = [str(p) for p in e["loc"]]
        key = ".".join(loc)
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            known = _known_keys(loc[:-1], tree)
            close = difflib.get_close_matches(loc[-1], known, n=1)
            msg = "unknown key" + (f" (did you mean '{'.'.join(loc[:-1] + close)}'?)" if close else "")
        elif e["type"] != "missing":
            msg += f" (got {e.get('input')!r})"
        lines.append(f"  field '{key}': {msg}")
    return "\n".join(lines)


def _known_keys(path: list[str], tree: dict[str, Any]) -> list[str]:
    """Field names of the schema model at ``path`` (best effort, for 'did you mean').

    The ``benchmark`` block is validated against its adapter's own config class (the tree names it), so
    its keys come from there.
    """
    model: Any = ExperimentConfig
    if path == ["train"]:  # the blocks the registered stage kinds name
        return sorted({k.train for k in stage_kinds.STAGE_KINDS.values()} | {"report_to"})
    if path[:1] == ["benchmark"]:
        try:
            module = import_module(tree["benchmark"]["adapter"], "benchmark.adapter")
            model = config_class(module, "benchmark.adapter", BenchmarkConfigBase)
        except (KeyError, TypeError, ValueError):
            return []
        path = path[1:]
    for part in path:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        model = field.annotation
        args = getattr(model, "__args__", None)
        if args:  # union (benchmark): merge all members' fields
            names: set[str] = set()
            for a in args:
                names |= set(getattr(a, "model_fields", {}))
            return sorted(names)
    return sorted(getattr(model, "model_fields", {}))


def compose(path: str | Path | None = None, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose a config file with its defaults and apply overrides, without validating.

    Args:
        path: Config file (:func:`resolve_config_path`); the search path's ``config.yaml`` when None. A recipe
            may inherit from it.
        overrides: ``group=option`` and ``dotted.key=value`` strings.

    Returns:
        The merged OmegaConf tree with interpolations resolved.
    """
    cfg_path = resolve_config_path(path) if path is not None else _root_config()
    choices, dotted = _split_overrides(overrides)
    used: set[str] = set()
    lifted: list[DictConfig] = []
    cfg = _compose(cfg_path, choices, True, lifted, used)
    if lifted:  # a preset's settings outside its group (train=smoke sizes the data steps too), after every file
        cfg = OmegaConf.merge(cfg, *lifted)
    if set(choices) - used:
        unknown = ", ".join(f"{g}={o}" for g, o in choices.items() if g not in used)
        raise ConfigError(f"{cfg_path}: override {unknown}: the config has no defaults entry for that group")
    if dotted:
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(dotted))
        except Exception as err:  # omegaconf raises several types for bad dotlists
            raise ConfigError(f"overrides {dotted}: {err}") from err
    try:
        OmegaConf.resolve(cfg)
    except Exception as err:
        raise ConfigError(f"{cfg_path}: cannot resolve interpolation: {err}") from err
    return cfg


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Compose, override and validate a config.

    Args:
        path: Config file; ``conf/config.yaml`` when None.
        overrides: ``group=option`` and ``dotted.key=value`` strings (CLI style).

    Returns:
        The validated, immutable experiment config.

    Raises:
        ConfigError: A file is missing or malformed, or a key is missing, unknown or mistyped.
    """
    cfg = compose(path, overrides)
    tree = OmegaConf.to_container(cfg, resolve=True)
    source = str(resolve_config_path(path) if path is not None else _root_config())
    if isinstance(tree.get("extensions"), list):  # here, so a failed import names the file
        try:
            import_extensions(tree["extensions"], source)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    try:
        return ExperimentConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_validation(err, source, tree)) from None


def to_yaml(cfg: ExperimentConfig) -> str:
    """Render a validated config as YAML (what a stage writes next to its outputs)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
