"""cpu_numerics: portable holds PyTorch to its AVX2 kernels and oneMKL to its cross-vendor branch (a real torch in a
fresh process, oneMKL's own MKL_VERBOSE report of each SGEMM); native: no change."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys

import pytest

from nemo_act.common.numerics import PORTABLE, apply_cpu_numerics
from nemo_act.common.paths import conf_root
from nemo_act.config.load import load_config

X86 = platform.machine().lower() in ("x86_64", "amd64")
CHILD = """
import json, os, sys
from nemo_act.common.numerics import apply_cpu_numerics
done = apply_cpu_numerics(sys.argv[1])
import torch
torch.ones(64, 64) @ torch.ones(64, 64)  # one SGEMM: oneMKL reports its mode on stdout under MKL_VERBOSE=1
print(json.dumps({"set": done, "capability": torch.backends.cpu.get_cpu_capability(),
                  "env": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")}}))
"""


def _child(mode: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in PORTABLE}
    out = subprocess.run([sys.executable, "-c", CHILD, mode], env={**clean, "MKL_VERBOSE": "1", **env},
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return report | {"cnr": sorted(set(re.findall(r"CNR:(\S+)", out.stdout)))}


@pytest.mark.skipif(not X86, reason="portable numerics hold x86-64 CPUs to AVX2; other architectures keep their path")
def test_portable_holds_torch_to_avx2_and_keeps_what_the_user_set():
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if " avx2" not in flags:
        pytest.skip("this CPU has no AVX2: PyTorch runs its default kernels either way")
    native, portable = _child("native"), _child("portable")
    assert native["set"] == {} and native["env"]["ATEN_CPU_CAPABILITY"] is None
    assert portable["capability"] == "AVX2" and portable["set"] == PORTABLE
    if portable["cnr"]:  # torch's BLAS is oneMKL (x86-64 wheels): it took the branch it keeps on Intel and AMD alike
        assert portable["cnr"] == ["COMPATIBLE"], portable["cnr"]  # MKL_CBWR=AVX2 showed AUTO on AMD: not portable
    if native["capability"] == "AVX2":
        pytest.skip("this CPU's best kernels are AVX2 already: nothing to tell apart")
    mine = _child("portable", MKL_CBWR="AUTO")
    assert mine["env"]["MKL_CBWR"] == "AUTO" and "MKL_CBWR" not in mine["set"]


@pytest.mark.skipif(not X86, reason="portable numerics hold x86-64 CPUs to AVX2; other architectures keep their path")
def test_portable_after_torch_is_imported_is_refused_naming_the_variables(monkeypatch):
    import torch  # noqa: F401  (the point: it is imported)

    for key in PORTABLE:
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(RuntimeError, match="ATEN_CPU_CAPABILITY=avx2, MKL_CBWR=COMPATIBLE, ONEDNN_MAX_CPU_ISA=AVX2"):
        apply_cpu_numerics("portable")
    assert apply_cpu_numerics("native") == {}


def test_the_demo_is_portable_and_the_setting_is_part_of_what_a_stage_is_made_with(tmp_path):
    """README's demo figures come from portable numerics; a stage made with other numerics is not reused."""
    from nemo_act.run.cache import stage_fingerprint

    demo = load_config(conf_root() / "demo.yaml")
    assert demo.cpu_numerics == "portable" and load_config(None).cpu_numerics == "native"
    data = tmp_path / "experts.jsonl"
    data.write_text("{}\n")
    native = demo.model_copy(update={"cpu_numerics": "native"})
    assert stage_fingerprint("il", "random", data, demo) != stage_fingerprint("il", "random", data, native)
