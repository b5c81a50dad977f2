"""A write that the filesystem refused, as one line naming the path: a full disk, a quota, a read-only mount.

Without this, a full disk during a training stage surfaced as torch's ``RuntimeError: [enforce fail at
inline_container.cc:672] . unexpected pos 715968 vs 715856`` (``torch.save`` of TRL's ``optimizer.pt``: its zip
writer checks its own offsets, not ``errno``) and Python's file writes as ``OSError: [Errno 28] No space left on
device`` with no file name. :func:`write_failure` turns either into a sentence that names the output and says what
to do; what was written stays (records are appended whole, checkpoints are skipped unless whole), so the same
command resumes once there is room.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

REFUSED = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
           errno.EROFS: "read-only filesystem", errno.EACCES: "permission denied"}  # fmt: skip
FULL = (errno.ENOSPC, errno.EDQUOT)
TORCH_WRITER = ("unexpected pos", "PytorchStreamWriter failed")  # torch's zip writer (caffe2/serialize)
ROOM_BYTES = 64 << 20  # less free space than this under the output counts as a full disk


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def filesystem_state(path: str | Path) -> str | None:
    """Why the filesystem holding ``path`` refuses writes, as far as ``statvfs`` tells: read-only, or (nearly) full."""
    try:
        st = os.statvfs(_existing(Path(path).absolute()))
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return REFUSED[errno.EROFS]
    free = st.f_bavail * st.f_frsize
    if free < ROOM_BYTES:
        return f"{REFUSED[errno.ENOSPC]} ({free >> 10} KiB free)"
    return None


def write_failure(err: BaseException, output: str | Path | None) -> str | None:
    """The one-line message for a write the filesystem refused, or None when ``err`` is something else.

    Args:
        err: The exception a command ended with.
        output: What the command writes (its ``--out`` / ``--run-dir``), named when ``err`` names no file.
    """
    if isinstance(err, OSError) and err.errno in REFUSED:
        where, reason, full = err.filename or output, REFUSED[err.errno], err.errno in FULL
    elif isinstance(err, RuntimeError) and any(m in str(err) for m in TORCH_WRITER) and output is not None:
        state = filesystem_state(output)
        where, full = output, state is None or state.startswith(REFUSED[errno.ENOSPC])
        reason = state or f"the write failed ({str(err).strip().splitlines()[0]})"
    else:
        return None
    todo = "make room" if full else "make it writable"
    return (
        f"{where}: {reason}; {todo} (or point the output elsewhere) and run the command again: "
        "what was written is kept and it resumes from there"
    )
