"""Where the twin lane's NeMo-RL comes from (tools/cluster_twin/nemo_rl_source.py): the user's checkout or a git
archive of it, checked against the pin; without one, one line that says how to get it, and a failing lane.

The sources here are real git repositories and ``git archive`` outputs made in a temporary folder, laid out as
NeMo-RL's is (``nemo_rl/package_info.py`` with MAJOR/MINOR/PATCH/PRE_RELEASE, NeMo-RL v0.7.0 lines 16-19; an
archive of one top folder with git's commit id in its pax ``comment`` header, which ``git get-tar-commit-id``
reads): nothing of NeMo-RL's own code is needed, so this runs in ``make test``. The lane on the real release runs
``test_the_twins_pins_are_nemo_rls_own_lock`` (tests/test_cluster_twin.py) against the user's copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from needs_nemo_rl import REPO, nemo_rl_source

from nemo_act.config import load_config

PACKAGE_INFO = 'MAJOR = 0\nMINOR = {minor}\nPATCH = 0\nPRE_RELEASE = ""\n'
TOOL = [sys.executable, str(REPO / "tools" / "cluster_twin" / "nemo_rl_source.py")]


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _release(tmp: Path, minor: int) -> tuple[Path, str]:
    """A git checkout laid out as NeMo-RL's, at version 0.<minor>.0; its folder and HEAD commit."""
    root = tmp / f"nemo-rl-0.{minor}"
    (root / "nemo_rl").mkdir(parents=True)
    (root / "nemo_rl" / "package_info.py").write_text(PACKAGE_INFO.format(minor=minor))
    (root / "nemo_rl" / "__init__.py").write_text("")
    (root / "uv.lock").write_text(f'version = 1\n[[package]]\nname = "torch"\nversion = "2.{minor}.0"\n')
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "release")
    return root, _git(root, "rev-parse", "HEAD")


@pytest.fixture
def pinned(tmp_path, monkeypatch):
    """A 0.7.0 checkout, and the tool's pin pointed at its commit (a pin file of the repository's shape)."""
    root, commit = _release(tmp_path, 7)
    pin = tmp_path / "_nemo_rl_pin.yaml"
    text = nemo_rl_source.PIN_FILE.read_text()
    real = nemo_rl_source.read_pin()
    pin.write_text(text.replace(real.commit, commit))
    monkeypatch.setattr(nemo_rl_source, "PIN_FILE", pin)
    return root, commit, nemo_rl_source.read_pin(pin)


def test_the_pin_names_the_release_its_commit_and_the_config_loads_it():
    pin = nemo_rl_source.read_pin()
    cfg = load_config(overrides=["engine=nemo_rl"])  # the engine whose block carries the pin
    assert (cfg.engine.nemo_rl_release, cfg.engine.nemo_rl_commit) == (pin.release, pin.commit)
    assert len(pin.commit) == 40 and int(pin.commit, 16) and pin.version == pin.release.removeprefix("v")


def test_a_checkout_and_its_git_archive_are_checked_by_commit(pinned, tmp_path, monkeypatch):
    root, commit, pin = pinned
    archive = tmp_path / "nemo-rl.tar.gz"
    _git(root, "archive", "--format=tar.gz", "--prefix=RL-0.7.0/", "-o", str(archive), "HEAD")
    for spec, kind in ((root, "checkout"), (archive, "archive")):
        source = nemo_rl_source.read_source(spec)
        assert (source.kind, source.commit, source.version) == (kind, commit, "0.7.0")
        assert f"({commit[:12]})" in nemo_rl_source.check(source, pin)
        assert 'version = "2.7.0"' in nemo_rl_source.uv_lock(source)  # the release's lock, read in place
    # installed into a venv: the archive unpacked under its src/, the checkout used where it is, each on a .pth
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    monkeypatch.chdir(tmp_path)  # the venv named relative to the working folder, as the Makefile names it
    for spec, where in ((archive, venv / "src" / f"nemo-rl-{commit[:12]}"), (root, root.resolve())):
        got = nemo_rl_source.install(nemo_rl_source.read_source(spec), Path("venv"))
        assert got == where and (got / "nemo_rl" / "package_info.py").is_file()
        imported = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import nemo_rl; print(nemo_rl.__file__)"],
            capture_output=True, text=True, check=True, cwd="/",
        ).stdout  # fmt: skip
        assert imported.startswith(str(where))


def test_another_commit_is_refused_naming_both(pinned, tmp_path):
    _, _, pin = pinned
    other, commit = _release(tmp_path / "other", 6)
    with pytest.raises(nemo_rl_source.SourceError) as err:
        nemo_rl_source.check(nemo_rl_source.read_source(other), pin)
    message = str(err.value)
    assert commit[:12] in message and pin.commit[:12] in message and "0.6.0" in message and pin.release in message


def test_without_git_metadata_only_the_version_is_checked_and_said(pinned, tmp_path):
    root, _, pin = pinned
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git"))
    line = nemo_rl_source.check(nemo_rl_source.read_source(copy), pin)
    assert "its version 0.7.0 was checked, not the commit" in line
    (copy / "nemo_rl" / "package_info.py").write_text(PACKAGE_INFO.format(minor=6))
    with pytest.raises(nemo_rl_source.SourceError, match="version 0.6.0 .*not the pinned"):
        nemo_rl_source.check(nemo_rl_source.read_source(copy), pin)


@pytest.mark.parametrize("what", ["missing", "empty folder", "not an archive", "archive of something else"])
def test_a_wrong_source_is_one_line_naming_it(tmp_path, what):
    spec = {
        "missing": tmp_path / "nope",
        "empty folder": tmp_path,
        "not an archive": tmp_path / "notes.txt",
        "archive of something else": tmp_path / "other.tar.gz",
    }[what]
    (tmp_path / "notes.txt").write_text("x")
    if what == "archive of something else":
        (tmp_path / "pkg").mkdir()
        (tmp_path / "pkg" / "a.py").write_text("")
        shutil.make_archive(str(tmp_path / "other"), "gztar", tmp_path, "pkg")
    done = subprocess.run([*TOOL, "check", "--source", str(spec)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: NEMO_RL_SOURCE={spec}")


@pytest.mark.heavy  # runs make
def test_the_lane_without_nemo_rl_says_how_to_get_it_and_fails(tmp_path):
    """``make test-cluster`` asked for with no source: one line, a failure, and nothing built (the check comes before
    the twin's venv); ``.ci/run`` prints the same line and runs the lane that needs no NeMo-RL."""
    env = {k: v for k, v in os.environ.items() if k != "NEMO_RL_SOURCE"}
    done = subprocess.run(
        ["make", "-s", "test-cluster", f"CVENV={tmp_path / 'venv'}"], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and not (tmp_path / "venv").exists()
    pin = nemo_rl_source.read_pin()
    assert f"git clone -b {pin.release}" in done.stderr and "make test-cluster NEMO_RL_SOURCE=" in done.stderr
    ci = (REPO / ".ci" / "run").read_text()
    assert "nemo_rl_source.py why" in ci and "lane test-image-python" in ci


def test_nothing_in_the_repository_points_into_shared_for_nemo_rl():
    """NeMo-RL's code is never kept in shared/ or here: no tracked file names a default there."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    hits = [
        f for f in files
        if f != "tests/test_nemo_rl_source.py" and (REPO / f).is_file()
        and "shared/nemo-rl" in (REPO / f).read_text(errors="ignore")
    ]  # fmt: skip
    assert hits == []
