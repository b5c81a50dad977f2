"""A full disk or a read-only mount ends a command with one line naming the output, exit 2, no traceback (issue 35).

Real filesystems: each case mounts a small tmpfs (so it needs root and ``mount``, as this project's CI machines
have; elsewhere it skips saying so) and runs the real command in its own process on it. Filling a 1.5 MiB tmpfs
during an IL stage reproduces what a full disk gave before: torch's zip writer failing on TRL's ``optimizer.pt``
with ``RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos ...`` and no path.
"""

import errno
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from nemo_act.common.write_errors import write_failure

pytestmark = pytest.mark.heavy
CLI = [sys.executable, "-m", "nemo_act.cli"]
ENV = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")


@contextmanager
def tmpfs(folder: Path, size: str, *options: str):
    folder.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root and mount (a full disk is made, not pretended)")
    opts = ",".join((f"size={size}", *options))
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(folder)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _one_line(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-3000:]
    errors = [x[x.index("error: ") :] for x in res.stderr.splitlines() if "error: " in x]  # after a bar's \r
    assert len(errors) == 1, res.stderr[-3000:]
    return errors[0]


def test_a_disk_that_fills_during_a_stage_is_one_line_naming_the_stage_folder(tiny_model_dir, sw_experts, tmp_path):
    with tmpfs(tmp_path / "small", "1500k") as small:
        out = small / "il"
        cmd = [*CLI, "train", "--stage", "il", "--init", str(tiny_model_dir), "--data", str(sw_experts), "--out",
               str(out), "train.il.max_steps=4", "train.il.save_steps=2", "train.il.batch_size=2",
               "train.il.grad_accum=1", "train.il.max_length=4096", "benchmark.max_admissible_shown=8"]  # fmt: skip
        res = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
        line = _one_line(res)
        assert line.startswith(f"error: {out}: no space left on the device (") and "KiB free)" in line, line
        assert "run the command again" in line


def test_a_full_disk_under_a_data_step_is_one_line(sw_experts, tmp_path):
    with tmpfs(tmp_path / "tiny", "12k") as tiny:
        out = tiny / "pairs.jsonl"
        cmd = [*CLI, "pairs", "--experts", str(sw_experts), "--policy", "random", "--out", str(out), "pairs.k=4"]
        line = _one_line(subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600))
        assert "no space left on the device" in line and str(tiny) in line, line


def test_a_read_only_output_is_one_line(sw_experts, tmp_path):
    with tmpfs(tmp_path / "ro", "1m", "ro") as ro:
        out = ro / "pairs.jsonl"
        cmd = [*CLI, "pairs", "--experts", str(sw_experts), "--policy", "random", "--out", str(out)]
        line = _one_line(subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600))
        assert line == f"error: {out}: {ro} is on a read-only filesystem", line


def test_write_failure_names_the_file_or_the_output():
    full = OSError(errno.ENOSPC, "No space left on device")  # a file object's write: no filename
    assert write_failure(full, "/runs/a").startswith("/runs/a: no space left on the device; make room")
    named = OSError(errno.EROFS, "Read-only file system", "/runs/a/x.json")
    assert write_failure(named, "/runs/a").startswith("/runs/a/x.json: read-only filesystem; make it writable")
    denied = write_failure(PermissionError(errno.EACCES, "Permission denied", "/runs/a/s.json"), "/runs/a")
    assert denied.startswith("/runs/a/s.json: permission denied; make it writable (or point the output elsewhere)")
    assert write_failure(OSError(errno.EIO, "Input/output error"), "/runs/a") is None  # not a refused write
    assert write_failure(RuntimeError("shape mismatch"), "/runs/a") is None
