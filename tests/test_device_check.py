"""The device check (bench/device_check.sh) without a GPU: its shell parses, and each part that can run
on a CPU runs end to end on a tiny shape (``--smoke``), so a lent GPU's few minutes are not lost to a typo."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # the whole module: see tests/conftest.py for what heavy means

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_device_check_script_parses_and_its_parts_run_on_a_tiny_shape(tmp_path):
    assert subprocess.run(["bash", "-n", str(REPO / "bench" / "device_check.sh")]).returncode == 0
    for part in ("probe", "rate", "rate-invariant", "hf", "act"):
        res = subprocess.run(
            [sys.executable, "bench/device_check.py", part, "--smoke", "--out", str(tmp_path)],
            cwd=REPO, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-2000:]
    probe = json.loads((tmp_path / "probe.json").read_text())
    assert probe["packages"]["torch"] and probe["packages"]["trl"] and probe["gpu"] is None
    rate = json.loads((tmp_path / "rate.json").read_text())
    assert rate["engine"].startswith("hf") and rate["requests_per_s"] > 0 and rate["generated"] == 4 * 8
    assert json.loads((tmp_path / "rate-invariant.json").read_text())["skipped"].startswith(
        "batch invariance is vLLM's"
    )
    hf = json.loads((tmp_path / "hf.json").read_text())
    assert hf["tokens_per_s"] > 0 and hf["seq"] == 64
    act = json.loads((tmp_path / "act.json").read_text())
    assert act["steps"] == 2 and act["prompt_tokens"] > 100 and act["generated_tokens_per_s"] > 0
    res = subprocess.run(
        [sys.executable, "bench/device_check.py", "megatron", "--smoke", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode != 0 and "needs a GPU" in res.stderr  # says why instead of pretending
    table = subprocess.run(
        [sys.executable, "bench/device_check.py", "summary", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "| act | steps 2" in table and "| megatron | not run or failed" in table


# A device image with torch and transformers but none of our config stack: ``sys.modules[name] = None`` is how Python
# marks a module absent (its import raises ImportError, importlib.util.find_spec returns None). yaml is left to the
# parts that load transformers, which imports it itself (PyYAML is one of its requirements); the probe runs without.
WITHOUT = """
import runpy, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_every_part_runs_without_pydantic_or_yaml_from_any_folder_without_pythonpath(tmp_path):
    """Issue 56: a module-level import of the config schema (through ``nemo_act.kinds.act``) killed every part at
    import on a device image without pydantic, and sat before the ``sys.path`` line, so the script failed without
    PYTHONPATH. Run from another folder with PYTHONPATH unset: the parts that need only torch and transformers run,
    and the act part says what it lacks."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = str(REPO / "bench" / "device_check.py")
    for part, absent in (("probe", "pydantic,omegaconf,yaml"), ("hf", "pydantic,omegaconf"),
                         ("rate", "pydantic,omegaconf"), ("act", "pydantic,omegaconf")):  # fmt: skip
        res = subprocess.run(
            [sys.executable, "-c", WITHOUT, absent, script, part, "--smoke", "--out", str(tmp_path / "out")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0, (part, res.stderr[-2000:])
    probe = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert probe["packages"]["pydantic"] is None and probe["packages"]["torch"]
    assert json.loads((tmp_path / "out" / "hf.json").read_text())["tokens_per_s"] > 0
    assert json.loads((tmp_path / "out" / "rate.json").read_text())["requests_per_s"] > 0
    act = json.loads((tmp_path / "out" / "act.json").read_text())
    assert act["skipped"].startswith("the local engine needs omegaconf, pydantic (")


def test_the_rate_parts_model_config_loads_as_a_causal_lm(tmp_path):
    """The config the rate part hands vLLM, saved and read back as vLLM reads it: it names Qwen3ForCausalLM (vLLM
    maps a config without ``architectures`` from its model_type, and ``qwen3`` alone is the pooling Qwen3Model,
    vLLM 0.20.0 ``transformers_utils/config.py:743-753``), and transformers builds that class from it (on the meta
    device: the 8B shape allocates nothing)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    sys.path.insert(0, str(REPO / "bench"))
    import device_check

    device_check._qwen3_config(device_check.SHAPE_8B, tied=False).save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.architectures == ["Qwen3ForCausalLM"] and config.model_type == "qwen3"
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert type(model).__name__ == "Qwen3ForCausalLM" and model.config.tie_word_embeddings is False
    params = sum(p.numel() for p in model.parameters())
    assert 8.0e9 < params < 8.4e9  # Qwen3-8B: 8.2B parameters


# vLLM's offline API as the rate part calls it, standing in where vLLM cannot run (no GPU): ``LLM(...)`` fails at start
# the way vLLM 0.20.0 does when the GPU is not free enough (``vllm/v1/worker/utils.py:412-419``, ``request_memory``,
# its message word for word); ``__version__`` as ``vllm/version.py`` exports it.
STAND_IN_VLLM = """
__version__ = "0.20.0"


class SamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class LLM:
    def __init__(self, **kwargs):
        raise ValueError(
            "Free memory on device cuda:0 (10.05/139.81 GiB) on startup is less than desired GPU memory "
            "utilization (0.85, 118.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
            "processes."
        )
"""


def test_a_vllm_engine_that_fails_to_start_says_what_it_tried_and_where_it_stopped(tmp_path):
    """The rate part prints vLLM's version and the engine's arguments before ``LLM(...)``, so a lent GPU's minutes
    are not lost to a traceback with no version line (before, both came only after ``LLM(...)`` returned); the
    failure is one last line naming the step, and ``rate.json`` says where it stopped."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text(STAND_IN_VLLM)
    out = tmp_path / "out"
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, "bench/device_check.py", "rate", "--out", str(out), "--requests", "4",
         "--prompt-tokens", "16", "--completion", "4"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert res.returncode == 1
    first = res.stdout.splitlines()[0]
    assert first.startswith("rate: vLLM 0.20.0, VLLM_BATCH_INVARIANT=0, Qwen3-8B shape with dummy weights, LLM(")
    assert '"gpu_memory_utilization": 0.85' in first and '"load_format": "dummy"' in first
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("rate: failed at LLM(...) start-up: ValueError: Free memory on device cuda:0"), last
    written = json.loads((out / "rate.json").read_text())
    assert written["failed"].startswith("LLM(...) start-up: ValueError") and written["engine"] == "vllm 0.20.0"
    table = subprocess.run([sys.executable, "bench/device_check.py", "summary", "--out", str(out)], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "| rate | engine vllm 0.20.0, batch_invariant 0, failed LLM(...) start-up: ValueError" in table
