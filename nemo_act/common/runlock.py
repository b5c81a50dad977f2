"""One writer per run or data folder: a lock file held with ``fcntl.flock`` for the writer's whole life.

The kernel drops an flock when its process dies (kill -9 included), so on one host a dead holder never blocks
the next run. The lock file also records who holds it (host, pid, start time, command, Slurm job) and a
heartbeat the holder rewrites every ``lock.heartbeat_s``: on a shared filesystem where flock does not reach
across nodes, a record from another host whose heartbeat has stopped for ``lock.stale_after_s`` is a dead
holder (its node went away) and is taken over with a message; one whose heartbeat still moves is a live run
and the newcomer stops. A requeued Slurm job (same ``SLURM_JOB_ID``) takes its own earlier record over at once:
Slurm never runs two instances of one job. The file is never deleted (a deleted lock file lets two writers
lock two different files); a finished holder marks its record released.

Commands that write into a run or data folder take the lock (``nemo-act run``, ``demo``, ``experts``, ``pairs``,
``reflection``, ``train``, ``eval``); the steps a run starts in child processes work under their parent's lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from nemo_act.common.write_errors import REFUSED, filesystem_state

LOCK_NAME = ".nemo-act.lock"
RECORD_BYTES = 4096  # the record is rewritten in place as one write of this size: a reader never sees half of one


class LockedError(RuntimeError):
    """Another live process writes into this folder."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a lock."""

    host: str
    pid: int
    started: float
    command: str
    heartbeat: float
    slurm_job: str | None = None
    released: bool = False

    def describe(self) -> str:
        """One line naming the holder."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        job = f", Slurm job {self.slurm_job}" if self.slurm_job else ""
        return f"pid {self.pid} on {self.host}{job}, started {when}: {self.command}"


def lock_path(target: str | Path, is_file: bool) -> Path:
    """The lock file of an output: ``<folder>/.nemo-act.lock`` for a folder, ``<parent>/.<name>.lock`` for a file."""
    target = Path(target)
    return target.parent / f".{target.name}.lock" if is_file else target / LOCK_NAME


def _read(fd: int) -> Holder | None:
    raw = os.pread(fd, RECORD_BYTES, 0)
    try:
        return Holder(**json.loads(raw)) if raw.strip() else None
    except (ValueError, TypeError):  # cut short by a kill mid-write, or not ours: treat as no record
        return None


def _write(fd: int, holder: Holder) -> None:
    """Rewrite the record in place, as one ``pwrite`` of :data:`RECORD_BYTES` (JSON padded with spaces).

    No truncation: a reader on this host (or a heartbeat reader on another) sees the old record or the new.
    """
    data = json.dumps(asdict(holder)).encode()[: RECORD_BYTES - 1].ljust(RECORD_BYTES - 1) + b"\n"
    os.pwrite(fd, data, 0)
    os.fsync(fd)


class OutputPathError(ValueError):
    """An output path that cannot be written.

    A file where a folder goes, a folder where a file goes, a parent that is a file, a folder this user may not
    write.
    """


def check_output(target: str | Path, is_file: bool) -> None:
    """Refuse an output path that the command could not write, before any work (one line naming it).

    Args:
        target: The output file (``is_file``) or folder.
        is_file: Whether the command writes a file there (``pairs --out``) rather than a folder (``--run-dir``).
    """
    target = Path(target)
    what = "file" if is_file else "folder"
    if target.exists() and target.is_dir() == is_file:
        kind = "a folder" if target.is_dir() else "a file"
        raise OutputPathError(f"{target}: {kind} is there, and this command writes a {what} at that path")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputPathError(f"{target}: {parent} is a file, so no {what} can be made under it")
            if not os.access(parent, os.W_OK | os.X_OK):
                if filesystem_state(parent) == REFUSED[errno.EROFS]:
                    raise OutputPathError(f"{target}: {parent} is on a read-only filesystem")
                raise OutputPathError(f"{target}: {parent} is not writable by this user")
            break


class RunLock:
    """The lock of one output folder or file, held from :meth:`acquire` to :meth:`release`.

    A command that fails before it wrote its output leaves nothing behind: the lock file (and the folder the
    lock made for it) go again. Only then is the file removed; a finished or interrupted holder keeps it.

    Args:
        target: The run/data folder or output file written by the command.
        is_file: ``target`` is a file (``pairs.jsonl``), not a folder.
        command: What holds it (shown to whoever is refused).
        heartbeat_s: Seconds between heartbeats (config ``lock.heartbeat_s``).
        stale_after_s: A record from another host whose heartbeat has not moved for this long is taken over
            (config ``lock.stale_after_s``).
        say: Where take-over messages go (``print`` to stderr by default).
    """

    def __init__(
        self,
        target: str | Path,
        is_file: bool,
        command: str,
        heartbeat_s: float,
        stale_after_s: float,
        say=None,
    ):
        self.target = Path(target)
        self.is_file = is_file
        self.path = lock_path(target, is_file)
        self.command = command
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.say = say or (lambda msg: print(msg, file=sys.stderr))
        self._fd: int | None = None
        self._made: list[Path] = []
        self._me: Holder | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> RunLock:
        """Take the lock or raise :class:`LockedError` naming its live holder and how to proceed.

        Raises:
            OutputPathError: The output cannot be written there (checked before any work).
        """
        check_output(self.target, self.is_file)
        missing = [d for d in (self.path.parent, *self.path.parent.parents) if not d.exists()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._made = [self.path, *missing] if not self.path.exists() else missing
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise LockedError(self._refusal(holder)) from None
        try:
            self._take_over(fd, _read(fd))
        except BaseException:
            os.close(fd)  # closing drops the flock
            raise
        now = time.time()
        self._me = Holder(
            host=socket.gethostname(), pid=os.getpid(), started=now, command=self.command, heartbeat=now,
            slurm_job=os.environ.get("SLURM_JOB_ID"),
        )  # fmt: skip
        _write(fd, self._me)
        self._fd = fd
        self._thread = threading.Thread(target=self._beat, name="nemo-act-lock-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _refusal(self, holder: Holder | None) -> str:
        who = holder.describe() if holder else "a process that has not written its record yet"
        return (
            f"{self.path.parent}: another nemo-act process writes here ({who}). Wait for it to finish, or stop it "
            f"first; to run both, give this one another output folder. Lock file: {self.path}"
        )

    def _take_over(self, fd: int, holder: Holder | None) -> None:
        """We hold the flock; decide from the recorded holder whether it is really gone."""
        if holder is None or holder.released:
            return
        here = socket.gethostname()
        if holder.host == here:  # flock is exact on one host: the holder died without releasing
            self.say(f"[nemo-act] {self.path.parent}: taking over from a process that is gone ({holder.describe()})")
            return
        job = os.environ.get("SLURM_JOB_ID")
        if job and holder.slurm_job == job:
            self.say(f"[nemo-act] {self.path.parent}: requeued Slurm job {job} takes over its earlier run's lock")
            return
        # another host, on a filesystem where its flock may not reach us: is its heartbeat still moving?
        seen = holder.heartbeat
        waited_from = time.time()
        while time.time() - waited_from < self.stale_after_s:
            time.sleep(min(self.heartbeat_s / 4, 1.0))
            now = _read(fd)
            if now is not None and (now.released or now.heartbeat != seen):
                if now.released:
                    return
                raise LockedError(self._refusal(now) + " (its heartbeat is live on another node)")
        self.say(
            f"[nemo-act] {self.path.parent}: taking over a stale lock ({holder.describe()}; no heartbeat for "
            f"{self.stale_after_s:.0f} s)"
        )

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            fd, me = self._fd, self._me
            if fd is None or me is None:
                return
            self._me = Holder(**{**asdict(me), "heartbeat": time.time()})
            try:
                _write(fd, self._me)
            except OSError:  # the folder went away under us: nothing left to guard
                return

    def release(self, failed: bool = False) -> None:
        """Mark the record released and drop the lock (also done by the kernel if the process dies).

        Args:
            failed: The command raised; if it wrote nothing, what the lock made is removed.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._fd is None:
            return
        try:
            _write(self._fd, Holder(**{**asdict(self._me), "released": True, "heartbeat": time.time()}))
        except OSError:
            pass
        wrote = self.target.exists() and not (
            self.target.is_dir() and {p.name for p in self.target.iterdir()} <= {LOCK_NAME}
        )
        if failed and not wrote:
            for made in self._made:  # the lock file first, then the folders it needed, innermost first
                try:
                    made.unlink() if made == self.path else made.rmdir()
                except OSError:
                    break
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, exc_type, *exc) -> None:
        self.release(failed=exc_type is not None)
