"""Inputs checked before the first step (nemo_act/inputs.py): one line per missing model or file, no traceback,
no hub access offline."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nemo_act.config import conf_root, load_config
from nemo_act.inputs import MissingInputs, model_problem, require


def test_models_are_folders_with_weights_or_cached_hub_names(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert model_problem("random") is None and model_problem("gold") is None
    assert model_problem(str(tmp_path / "nope")) == f"{tmp_path / 'nope'} does not exist"
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    assert "is not an HF checkpoint" in model_problem(str(tmp_path / "half"))
    (tmp_path / "half" / "model.safetensors").write_bytes(b"x")
    assert model_problem(str(tmp_path / "half")) is None
    offline = model_problem("Qwen/Qwen3-8B", offline=True)
    assert "not in the HF cache" in offline and str(tmp_path / "hf") in offline and "hf download" in offline


class _Hub(BaseHTTPRequestHandler):
    """The hub's model metadata endpoint (``GET /api/models/<id>``), answering as huggingface.co does for a listed,
    an unknown and a gated model: huggingface_hub's ``hf_raise_for_status`` (``utils/_http.py``) reads the
    ``X-Error-Code`` header (``RepoNotFound`` -> RepositoryNotFoundError, ``GatedRepo`` -> GatedRepoError)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        repo = self.path.split("?")[0].removeprefix("/api/models/")
        self.server.asked.append(repo)
        if repo == "Qwen/Qwen3-8B":
            body = json.dumps({"id": repo, "sha": "0" * 40, "siblings": [{"rfilename": "config.json"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        code, error = (403, "GatedRepo") if repo.startswith("gated/") else (404, "RepoNotFound")
        self.send_response(code)
        self.send_header("X-Error-Code", error)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hub(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    server.asked = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    yield server
    server.shutdown()


def test_online_a_hub_name_not_cached_is_checked_with_one_metadata_request(tmp_path, monkeypatch, hub):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # make test runs offline: not here
    endpoint = os.environ["HF_ENDPOINT"]
    assert model_problem("Qwen/Qwen3-8B", offline=False) is None
    assert model_problem("Qwen/Qwen3-8b-typo", offline=False) == (
        f"Qwen/Qwen3-8b-typo: no such folder here, and no such model on the hub ({endpoint}), or it is private "
        "(log in with `hf auth login`); check the spelling"
    )
    assert "gated on the hub" in model_problem("gated/model", offline=False)
    assert hub.asked == ["Qwen/Qwen3-8B", "Qwen/Qwen3-8b-typo", "gated/model"]  # one request each
    assert "not a hub model id" in model_problem("a/b/c", offline=False)  # not asked: no such id can exist
    with socket.socket() as s:  # a port nothing listens on: the hub cannot be reached
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{s.getsockname()[1]}")
    unreachable = model_problem("Qwen/Qwen3-8B", offline=False)
    assert "could not be asked about it" in unreachable and "hf download Qwen/Qwen3-8B" in unreachable
    assert len(unreachable.splitlines()) == 1


def test_require_lists_every_problem_on_its_own_line(tmp_path):
    with pytest.raises(MissingInputs) as err:
        require({"--policy": str(tmp_path / "m"), "--critic": None}, {"--experts": tmp_path / "e.jsonl"})
    assert str(err.value).splitlines() == [
        f"--policy: {tmp_path / 'm'} does not exist",
        f"--experts: {tmp_path / 'e.jsonl'} does not exist",
    ]
    require({"--policy": "random"}, {"--experts": None})  # nothing missing: no error


def test_plan_on_a_yaml_that_is_not_a_recipe_says_so_in_one_line(tmp_path, capsys):
    from nemo_act.cli import main

    other = tmp_path / "other.yaml"
    other.write_text("foo: 1\nbar: {baz: 2}\n")
    assert main(["plan", str(other)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {other}: not a cluster recipe") and "conf/recipes/" in err[0]


def test_a_missing_file_is_named_without_errno(tmp_path, capsys):
    from nemo_act.cli import main

    assert main(["show", "--pairs", str(tmp_path / "nope.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nope.jsonl'}: no such file or directory"


@pytest.mark.heavy
def test_a_missing_model_stops_the_commands_before_any_step(tmp_path):
    """`run` with a nonexistent pipeline.init, `pairs` with a nonexistent policy, `eval-reasoning` with a hub name
    offline: exit 2 with one line per problem, no traceback, nothing written."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    cli = [sys.executable, "-m", "nemo_act.cli"]
    run = tmp_path / "run"
    cases = [
        ([*cli, "run", str(conf_root() / "pipeline" / "il.yaml"), "--run-dir", str(run),
          "pipeline.init=/nonexistent/ckpt"], ["error: pipeline.init: /nonexistent/ckpt does not exist"]),
        ([*cli, "pairs", "--experts", str(tmp_path / "experts.jsonl"), "--policy", "/nonexistent/model", "--out",
          str(tmp_path / "pairs.jsonl")], ["error: --policy: /nonexistent/model does not exist",
                                           f"--experts: {tmp_path / 'experts.jsonl'} does not exist"]),
        ([*cli, "eval-reasoning", "math500", "--policy", "reference", "--out", str(tmp_path / "r")],
         ["error: --policy: reference: no such folder here, and not in the HF cache"]),
    ]  # fmt: skip
    for cmd, lines in cases:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 2, res.stderr[-2000:]
        assert "Traceback" not in res.stderr
        got = res.stderr.strip().splitlines()
        assert len(got) == len(lines) and all(g.startswith(w) for g, w in zip(got, lines, strict=True)), got
    assert not run.exists() and not (tmp_path / "pairs.jsonl").exists() and not (tmp_path / "r").exists()


@pytest.mark.heavy
def test_a_misspelled_hub_id_stops_a_run_before_any_step(tmp_path, hub):
    """Online, `nemo-act run` with a model id the hub does not list: one line, exit 2, no run folder (it used to be
    found after the experts and pairs were built, as a two-traceback OSError)."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"} | {"HF_HOME": str(tmp_path / "hf")}
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "nemo_act.cli", "run", str(conf_root() / "pipeline" / "il.yaml"), "--run-dir",
           str(run), "model.name_or_path=Qwen/Qwen3-8b-typo"]  # fmt: skip
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == [
        f"error: model.name_or_path: Qwen/Qwen3-8b-typo: no such folder here, and no such model on the hub "
        f"({env['HF_ENDPOINT']}), or it is private (log in with `hf auth login`); check the spelling"
    ]
    # once (huggingface_hub itself may also fetch its agent-harness list, utils/_detect_agent.py)
    assert [a for a in hub.asked if not a.startswith("/")] == ["Qwen/Qwen3-8b-typo"] and not run.exists()


@pytest.mark.parametrize(
    ("name", "hinted"),
    [("runs/tiny-model", True), ("./my-tiny", True), ("{tmp}/tiny", True), ("Qwen/Qwen3-8BB", False)],
)
def test_the_tiny_model_hint_is_given_only_where_a_tiny_model_could_be_built(tmp_path, monkeypatch, name, hinted):
    """Issue 45: with the default model group (tiny) a misspelled hub id got "the tiny model is built with `nemo-act
    tiny-model --out Qwen/Qwen3-8BB`", which builds a random model under a hub-like name. The hint now comes for the
    tiny group's own path and for local paths only."""
    from nemo_act.inputs import run_inputs

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)  # runs/ and ./my-tiny are missing here
    name = name.format(tmp=tmp_path)
    cfg = load_config(overrides=["model=tiny", f"model.name_or_path={name}", "pipeline.stages=[il]"])
    with pytest.raises(MissingInputs) as err:
        run_inputs(cfg)
    assert ("nemo-act tiny-model --out" in str(err.value)) is hinted, str(err.value)
