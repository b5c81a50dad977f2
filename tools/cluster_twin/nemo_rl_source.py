"""Where the twin lane's NeMo-RL comes from: the user's own copy of the pinned release, checked, never ours.

    python tools/cluster_twin/nemo_rl_source.py check   [--source S]   # is S the pinned release?
    python tools/cluster_twin/nemo_rl_source.py install [--source S] --venv .venv-cluster   # put it on that venv's path
    python tools/cluster_twin/nemo_rl_source.py imported    # the NeMo-RL this Python imports (the image's), checked
    python tools/cluster_twin/nemo_rl_source.py why     # the one line a lane prints when no source is named

``S`` (default ``$NEMO_RL_SOURCE``) is one of

* a checkout of the tag (``git clone -b v0.7.0 <NeMo-RL's repository> nemo-rl``): used where it is;
* a git archive of it (``.tar.gz``/``.tgz``/``.tar``, e.g. the release's source download): unpacked into
  ``<venv>/src/nemo-rl-<commit>/``;
* ``/opt/nemo-rl`` inside the release image (a checkout: its Dockerfile adds the repository with
  ``--keep-git-dir=true``, NeMo-RL v0.7.0 ``docker/Dockerfile:28``).

It is checked against ``conf/engine/_nemo_rl_pin.yaml``: the commit (``git rev-parse HEAD`` of a checkout;
the ``comment`` pax header ``git archive`` writes, which ``git get-tar-commit-id`` reads) against
``nemo_rl_commit``; where no commit can be read (a copy without ``.git``, a tarball made by other means), the
version in ``nemo_rl/package_info.py`` against ``nemo_rl_release``, and the result says that only the version was
checked. NeMo-RL is not on PyPI (``nemo-rl`` there is an empty 0.0.0 placeholder) and its code is never kept in
this repository or in shared/: nothing here names a default location.

Standard library only: it runs on any Python before a venv exists (``make test-cluster`` checks first, then
builds), and on the image's own Python.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIN_FILE = REPO / "conf" / "engine" / "_nemo_rl_pin.yaml"
PACKAGE_INFO = "nemo_rl/package_info.py"
ARCHIVES = (".tar.gz", ".tgz", ".tar")


class SourceError(Exception):
    """A named source that is missing, unreadable or not the pinned release (the CLI: one line, exit status 2)."""


@dataclass(frozen=True)
class Pin:
    """The one NeMo-RL pin (``conf/engine/_nemo_rl_pin.yaml``)."""

    release: str  # the tag, e.g. v0.7.0
    commit: str  # the tag's commit

    @property
    def version(self) -> str:
        """The version ``nemo_rl/package_info.py`` of the tag says (``v0.7.0`` -> ``0.7.0``)."""
        return self.release.removeprefix("v")


@dataclass(frozen=True)
class Source:
    """A NeMo-RL source the user named, as read (nothing unpacked yet)."""

    path: Path
    kind: str  # "checkout" or "archive"
    commit: str | None  # None: no git metadata to read it from
    version: str | None


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it is inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def read_pin(path: Path | None = None) -> Pin:
    """The pin's tag and commit (the file's ``key: value`` lines; YAML is not needed for them)."""
    path = path or PIN_FILE
    values = dict(re.findall(r"^(nemo_rl_\w+):\s*(\S+)", path.read_text(), flags=re.M))
    missing = [k for k in ("nemo_rl_release", "nemo_rl_commit") if k not in values]
    if missing:
        raise SourceError(f"{path}: no {', '.join(missing)}")
    return Pin(values["nemo_rl_release"], values["nemo_rl_commit"])


def why(pin: Pin | None = None) -> str:
    """The one line a lane prints when no NeMo-RL source is named."""
    pin = pin or read_pin()
    return (
        f"the twin lane needs NeMo-RL {pin.release}'s source (not on PyPI, never kept in this repository): "
        f"git clone -b {pin.release} https://github.com/NVIDIA-NeMo/RL nemo-rl && "
        f"make test-cluster NEMO_RL_SOURCE=$PWD/nemo-rl (or a git archive of the tag, or /opt/nemo-rl in the "
        f"release image: make test-cluster-image)"
    )


def _version(text: str) -> str | None:
    """``MAJOR.MINOR.PATCH[PRE_RELEASE]`` of a ``package_info.py``."""
    parts = dict(re.findall(r'^(MAJOR|MINOR|PATCH|PRE_RELEASE)\s*=\s*"?([^"\n]*)"?\s*$', text, flags=re.M))
    if not all(k in parts for k in ("MAJOR", "MINOR", "PATCH")):
        return None
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}{parts.get('PRE_RELEASE', '')}"


def checkout_root(path: Path) -> Path | None:
    """The folder holding ``nemo_rl/`` (``path`` itself, or its one subfolder: an unpacked archive)."""
    if (path / PACKAGE_INFO).is_file():
        return path
    subs = [p for p in path.iterdir() if p.is_dir()] if path.is_dir() else []
    return subs[0] if len(subs) == 1 and (subs[0] / PACKAGE_INFO).is_file() else None


def _git_head(root: Path) -> str | None:
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    # safe.directory: a checkout owned by another user (a shared one, or the image's as another uid) is still read
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else None


def _archive_member(tar: tarfile.TarFile, suffix: str) -> tarfile.TarInfo | None:
    """The member ``<top folder>/<suffix>`` of an archive of one folder."""
    return next((m for m in tar.getmembers() if m.name.count("/") == suffix.count("/") + 1 and m.name.endswith(
        "/" + suffix)), None)  # fmt: skip


def read_source(spec: str | Path) -> Source:
    """Read what ``spec`` is without changing anything.

    Raises:
        SourceError: ``spec`` is missing, or neither a checkout nor an archive of NeMo-RL.
    """
    path = Path(spec).expanduser()
    if not path.exists():
        raise SourceError(f"NEMO_RL_SOURCE={spec}: no such file or folder")
    if path.is_dir():
        root = checkout_root(path)
        if root is None:
            raise SourceError(f"NEMO_RL_SOURCE={spec}: a folder without {PACKAGE_INFO} (not a NeMo-RL checkout)")
        return Source(root.resolve(), "checkout", _git_head(root), _version((root / PACKAGE_INFO).read_text()))
    if not path.name.endswith(ARCHIVES):
        raise SourceError(f"NEMO_RL_SOURCE={spec}: neither a folder nor an archive ({', '.join(ARCHIVES)})")
    try:
        with tarfile.open(path) as tar:
            commit = tar.pax_headers.get("comment")  # git archive's commit id (git get-tar-commit-id)
            member = _archive_member(tar, PACKAGE_INFO)
            info = tar.extractfile(member) if member else None
            version = _version(info.read().decode()) if info else None
    except (tarfile.TarError, OSError, EOFError) as err:
        raise SourceError(f"NEMO_RL_SOURCE={spec}: not a readable archive ({err})") from err
    if member is None:
        raise SourceError(f"NEMO_RL_SOURCE={spec}: no <folder>/{PACKAGE_INFO} in it (not an archive of NeMo-RL)")
    commit = commit if commit and re.fullmatch(r"[0-9a-f]{40}", commit) else None
    return Source(path.resolve(), "archive", commit, version)


def check(source: Source, pin: Pin) -> str:
    """What was checked, in one line; a :class:`SourceError` naming both sides when it is not the pin."""
    where = f"NEMO_RL_SOURCE={source.path}"
    if source.commit is not None:
        if source.commit != pin.commit:
            raise SourceError(
                f"{where} is NeMo-RL commit {source.commit[:12]} (version {source.version or '?'}), not the pinned "
                f"{pin.release} ({pin.commit[:12]}, {_shown(PIN_FILE)}): check out {pin.release} there, "
                "or move the pin (tools/cluster_twin/README.md says what moves with it)"
            )
        return f"NeMo-RL {pin.release} ({pin.commit[:12]}) from the {source.kind} {source.path}"
    if source.version != pin.version:
        raise SourceError(
            f"{where} is NeMo-RL version {source.version or '?'} (no git commit to read), not the pinned "
            f"{pin.release} ({_shown(PIN_FILE)})"
        )
    return (
        f"NeMo-RL {pin.release} from the {source.kind} {source.path} (no git metadata there: its version "
        f"{source.version} was checked, not the commit {pin.commit[:12]})"
    )


def install(source: Source, venv: Path) -> Path:
    """Put the checked source on ``venv``'s path (a ``nemo_rl.pth``, as the image's editable install does).

    A checkout is used where it is; an archive is unpacked once into ``<venv>/src/nemo-rl-<commit or version>/``.

    Returns:
        The NeMo-RL root (``NEMO_RL_DIR``: its ``examples/configs`` are the recipes' bases).
    """
    root, venv = source.path, venv.resolve()  # absolute: a .pth line is read relative to site-packages
    if source.kind == "archive":
        root = venv / "src" / f"nemo-rl-{(source.commit or source.version or 'unknown')[:12]}"
        if not (root / PACKAGE_INFO).is_file():
            partial = root.with_name(root.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            with tarfile.open(source.path) as tar:
                tar.extractall(partial, filter="data")
            top = checkout_root(partial)
            assert top is not None  # read_source found package_info.py one folder down
            shutil.rmtree(root, ignore_errors=True)
            top.rename(root)
            shutil.rmtree(partial)
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "nemo_rl.pth").write_text(f"{root}\n")
    return root


def read_file(source: Source, name: str) -> str:
    """A top-level file of the release (``uv.lock``, ``pyproject.toml``), from the checkout or the archive."""
    if source.kind == "checkout":
        return (source.path / name).read_text()
    with tarfile.open(source.path) as tar:
        member = _archive_member(tar, name)
        info = tar.extractfile(member) if member else None
        if info is None:
            raise SourceError(f"NEMO_RL_SOURCE={source.path}: no <folder>/{name} in it")
        return info.read().decode()


def uv_lock(source: Source) -> str:
    """The release's ``uv.lock`` (the twin's pins are its export)."""
    return read_file(source, "uv.lock")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``check``, ``install``, ``imported`` or ``why``."""
    import os

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["check", "install", "imported", "why"])
    p.add_argument("--source", default=os.environ.get("NEMO_RL_SOURCE", ""), help="default: $NEMO_RL_SOURCE")
    p.add_argument("--venv", type=Path, help="install: the venv whose path gets NeMo-RL")
    args = p.parse_args(argv)
    try:
        return _run(args, p)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, p: argparse.ArgumentParser) -> int:
    pin = read_pin()
    if args.command == "why":
        print(why(pin))
        return 0
    if args.command == "imported":  # the image: NeMo-RL installed (editable) in the Python running this
        try:
            import nemo_rl
        except ImportError as err:
            raise SourceError(f"{sys.executable} cannot import nemo_rl ({err}): {why(pin)}") from err
        root = Path(nemo_rl.__file__).resolve().parents[1]
        print(check(read_source(root), pin), file=sys.stderr)
        print(root)
        return 0
    if not args.source:
        print(f"error: NEMO_RL_SOURCE is not set: {why(pin)}", file=sys.stderr)
        return 2
    source = read_source(args.source)
    line = check(source, pin)
    if args.command == "check":
        print(line, file=sys.stderr)
        return 0
    if args.venv is None:
        p.error("install needs --venv")
    print(line, file=sys.stderr)
    print(install(source, args.venv))  # stdout: the root, for NEMO_RL_DIR
    return 0


if __name__ == "__main__":
    sys.exit(main())
