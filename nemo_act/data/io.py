"""JSONL input/output: validated reads, atomic writes and crash-safe resumable appends.

* :func:`read_jsonl` validates every line against a record type and fails with
  ``FILE:LINE: field 'a.b': message``.
* :func:`write_jsonl` writes to a temporary file in the same folder and renames it, so a reader
  never sees half a file.
* :class:`ResumableJsonl` appends records to ``OUT.partial`` as a long job goes (flushed and
  fsynced per call), reopens it after a crash dropping a torn last line, and renames it to ``OUT``
  when the job finishes.

A path ending in ``.gz`` is read and written gzip-compressed (ScienceWorld experts keep the env's
full valid-action list, ~35 KB a step uncompressed); ``.partial`` files are always plain text.
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

R = TypeVar("R", bound=BaseModel)


class RecordError(ValueError):
    """A JSONL line is not a valid record; the message names file, line and field."""


def _format_error(path: Path, lineno: int, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(record)"
        parts.append(f"{path}:{lineno}: field '{field}': {e['msg']}")
    return "\n".join(parts)


def parse_line(line: str, model: type[R], path: Path, lineno: int) -> R:
    """Parse one JSONL line into ``model``.

    Args:
        line: The raw line.
        model: Record type to validate against.
        path: File the line came from (for the message).
        lineno: 1-based line number (for the message).

    Returns:
        The validated record.

    Raises:
        RecordError: The line is not JSON or does not validate.
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}:{lineno}: invalid JSON: {err.msg} (column {err.colno})") from None
    if not isinstance(obj, dict):
        raise RecordError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
    try:
        return model.model_validate(obj)
    except ValidationError as err:
        raise RecordError(_format_error(path, lineno, err)) from None


def read_jsonl(path: str | Path, model: type[R]) -> Iterator[R]:
    """Yield validated records from a JSONL file (blank lines are skipped).

    Args:
        path: The file.
        model: Record type of every line.

    Yields:
        One record per non-blank line.

    Raises:
        RecordError: On the first malformed line, naming file, line and field.
        FileNotFoundError: The file does not exist.
    """
    path = Path(path)
    with _open_read(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = _decode(raw, path, lineno)
            if line.strip():
                yield parse_line(line, model, path, lineno)


def read_all(path: str | Path, model: type[R], what: str) -> list[R]:
    """All records of a file that must hold at least one (experts, pairs a stage trains on).

    Args:
        path: The file.
        model: Record type of every line.
        what: What the records are, for the message (``expert trajectories``).

    Raises:
        RecordError: A malformed line (as :func:`read_jsonl`), or no record at all.
    """
    records = list(read_jsonl(path, model))
    if not records:
        raise RecordError(f"{path}: no {what} in the file (it is empty or holds only blank lines)")
    return records


def _decode(raw: bytes, path: Path, lineno: int) -> str:
    """One line as text; a line that is not UTF-8 fails naming file, line and byte column."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(
            f"{path}:{lineno}: not UTF-8 text: byte 0x{raw[err.start]:02x} at column {err.start + 1} "
            "(JSONL files must be UTF-8; re-encode the file, e.g. iconv -f latin1 -t utf-8)"
        ) from None


def iter_json(path: str | Path, skipped: dict[str, list[int]] | None = None) -> Iterator[tuple[int, Any]]:
    """The JSON value of every non-blank line of a file (``.gz`` too), with its line number.

    For files in other formats than our records (a user's chat traces, WebShop's session logs). A UTF-8 byte
    order mark at the start of the file (some editors and Windows tools write one) is not part of line 1.

    Args:
        path: The file.
        skipped: Where given, a line that is not UTF-8 or not JSON is left out and its number recorded here under
            its reason (``not UTF-8``, ``not valid JSON``) instead of stopping the read.

    Raises:
        RecordError: A line is not UTF-8 or not JSON (file, line and column named), unless ``skipped`` is given.
    """
    path = Path(path)
    with _open_read(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                line = _decode(raw, path, lineno)
            except RecordError:
                if skipped is None:
                    raise
                skipped.setdefault("not UTF-8", []).append(lineno)
                continue
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as err:
                if skipped is None:
                    raise RecordError(f"{path}:{lineno}: not valid JSON: {err.msg} (column {err.colno})") from None
                skipped.setdefault("not valid JSON", []).append(lineno)
                continue
            yield lineno, value


def _open_read(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


def dumps(record: BaseModel | dict[str, Any]) -> str:
    """Serialise a record as one compact JSON line (no trailing newline)."""
    obj = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


REDO_STEP = "it records a finished step: delete it to redo that step"
RUN_REMEDY = (  # run.json: the runner writes it anew at the end of every invocation
    "it is rewritten at the end of every `nemo-act run`: run the same command again (finished stages and evaluations "
    "are reused), then this one"
)


def read_json(path: str | Path, remedy: str = REDO_STEP) -> Any:
    """A JSON file's content (a step's record: a manifest, ``stage.json``, a summary, ``run.json``).

    Args:
        path: The file.
        remedy: What to do when it is not valid JSON (said after the file, line and error).

    Raises:
        RecordError: The file is not valid JSON, naming it, the line and what to do.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}:{err.lineno}: not valid JSON ({err.msg}); {remedy}") from err


def file_mode() -> int:
    """The mode a plain new file gets under this process's umask (``0o644`` under the usual ``022``).

    Read from ``/proc/self/status`` where Linux has it (setting the umask to read it would race other threads).
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def follow_umask(folder: str | Path) -> None:
    """Give every file under ``folder`` the umask's mode.

    Libraries that write through a private temp file (safetensors' ``save_file``) leave ``0600``, which
    teammates on a shared cluster filesystem cannot read.
    """
    mode = file_mode()
    for p in Path(folder).rglob("*"):
        if p.is_file() and not p.is_symlink():
            p.chmod(mode)


def _write_atomic(path: Path, chunks: Iterable[str]) -> None:
    """Write text chunks to ``path`` through a temp file + fsync + rename (gzip when ``.gz``).

    The file gets the umask's mode (:func:`file_mode`), not the temp file's private ``0600``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, file_mode())
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.suffix == ".gz":
                with gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as gz:
                    for chunk in chunks:
                        gz.write(chunk.encode("utf-8"))
            else:
                for chunk in chunks:
                    raw.write(chunk.encode("utf-8"))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file + rename (no half-written file on failure)."""
    _write_atomic(Path(path), [text])


def append_json_line(path: str | Path, record: dict[str, Any]) -> None:
    """Append one JSON line to ``path`` durably (flushed and fsynced), for logs a killed process must keep."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def write_jsonl(path: str | Path, records: Iterable[BaseModel | dict[str, Any]]) -> int:
    """Write records atomically as JSONL (gzip when the path ends in ``.gz``); return how many."""
    count = 0

    def lines() -> Iterator[str]:
        nonlocal count
        for r in records:
            count += 1
            yield dumps(r) + "\n"

    _write_atomic(Path(path), lines())
    return count


class ResumableJsonl:
    """Append-as-you-go JSONL output that survives a crash and resumes without duplicates or gaps.

    Records go to ``<out>.partial``; each :meth:`append` call writes whole lines, flushes and fsyncs.
    Reopening after a crash keeps every complete line and truncates a torn last line. :meth:`finish`
    renames the partial file to ``out``.

    Args:
        out: Final output path.
        model: Record type of the lines (validated when resuming).
        key: Name of the field that identifies a unit of work (e.g. ``trajectory_id``).
    """

    def __init__(self, out: str | Path, model: type[R], key: str) -> None:
        self.out = Path(out)
        self.partial = self.out.with_name(self.out.name + ".partial")
        self.model = model
        self.key = key
        self.records: list[Any] = []
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if self.partial.exists():
            self._recover()
        self._fh = self.partial.open("a", encoding="utf-8")

    def _recover(self) -> None:
        raw = self.partial.read_bytes()
        keep = raw[: raw.rfind(b"\n") + 1]  # drop a torn last line
        if len(keep) != len(raw):
            with self.partial.open("r+b") as fh:
                fh.truncate(len(keep))
        for lineno, line in enumerate(keep.decode("utf-8").splitlines(), start=1):
            if line.strip():
                self.records.append(parse_line(line, self.model, self.partial, lineno))

    @property
    def done_keys(self) -> set[Any]:
        """Keys of the units already written (skip them when resuming)."""
        return {getattr(r, self.key) for r in self.records}

    def append(self, records: Iterable[BaseModel]) -> None:
        """Append records durably (one write, flush and fsync per call)."""
        batch = list(records)
        if not batch:
            return
        self._fh.write("".join(dumps(r) + "\n" for r in batch))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.records.extend(batch)

    def finish(self, order: Iterable[Any] | None = None) -> Path:
        """Close and move the partial file to the final path (compressing it for ``.gz``).

        Args:
            order: Keys of every record: the file is rewritten in this order (records appended as they were
                done, e.g. by concurrent workers, come out in one order whatever the timing); None: as appended.
        """
        self._fh.close()
        if order is not None:
            records = self.ordered(order)
            _write_atomic(self.partial, (dumps(r) + "\n" for r in records))
        if self.out.suffix == ".gz":
            with self.partial.open(encoding="utf-8") as src:
                _write_atomic(self.out, iter(lambda: src.read(1 << 20), ""))
            self.partial.unlink()
        else:
            os.replace(self.partial, self.out)
        return self.out

    def ordered(self, keys: Iterable[Any]) -> list[Any]:
        """The written records in the order of ``keys`` (whatever order they were appended in).

        Raises:
            KeyError: A key has no record (the job is not finished).
        """
        by_key = {getattr(r, self.key): r for r in self.records}
        return [by_key[k] for k in keys]

    def __enter__(self) -> ResumableJsonl:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            self.close()  # keep the partial file for a resume

    def discard(self) -> None:
        """Close and delete the partial file (its content has been written elsewhere)."""
        self.close()
        self.partial.unlink(missing_ok=True)

    def close(self) -> None:
        """Close without finishing (the partial file stays for a later resume)."""
        if not self._fh.closed:
            self._fh.close()
