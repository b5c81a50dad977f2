import json
from pathlib import Path

import pytest

from nemo_act.data import Pair, RecordError, ResumableJsonl, Trajectory, read_jsonl, write_jsonl
from nemo_act.data.manifest import read_manifest, reusable, write_manifest


def _traj(i: int = 0) -> dict:
    return {
        "trajectory_id": f"scienceworld/boil/{i}",
        "benchmark": "scienceworld",
        "task_id": "boil",
        "variation": i,
        "split": "train",
        "task_description": "Your task is to boil water.",
        "steps": [
            {
                "observation": "You are in the hallway.",
                "action": "go to kitchen",
                "admissible_actions": ["go to kitchen", "look around"],
                "action_admissible": True,
            }
        ],
        "score": 100.0,
        "success": True,
        "source": "scienceworld-gold",
    }


def _write_lines(path: Path, objs) -> None:
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs))


def test_round_trip_keeps_every_field(tmp_path):
    path = tmp_path / "experts.jsonl"
    recs = [Trajectory.model_validate(_traj(i)) for i in range(3)]
    assert write_jsonl(path, recs) == 3
    back = list(read_jsonl(path, Trajectory))
    assert back == recs and back[0].schema_version == 1


def test_invalid_json_names_file_and_line(tmp_path):
    path = tmp_path / "experts.jsonl"
    _write_lines(path, [_traj(0), "{not json"])
    with pytest.raises(RecordError, match=rf"{path}:2: invalid JSON"):
        list(read_jsonl(path, Trajectory))


def test_non_utf8_line_names_file_line_and_byte(tmp_path):
    good = json.dumps(_traj(), ensure_ascii=False)
    path = tmp_path / "experts.jsonl"
    path.write_bytes(good.encode() + b"\n" + good.replace("kitchen", "caf\u00e9").encode("latin-1") + b"\n")
    with pytest.raises(RecordError, match=r"experts.jsonl:2: not UTF-8 text: byte 0xe9 at column \d+"):
        list(read_jsonl(path, Trajectory))


def test_missing_field_names_file_line_and_field(tmp_path):
    bad = _traj(1)
    del bad["steps"][0]["admissible_actions"]
    path = tmp_path / "experts.jsonl"
    _write_lines(path, [_traj(0), "", bad])
    with pytest.raises(RecordError, match=rf"{path}:3: field 'steps.0.admissible_actions': Field required"):
        list(read_jsonl(path, Trajectory))


def test_wrong_type_and_unknown_field_are_named(tmp_path):
    bad = _traj(0)
    bad["score"] = "high"
    bad["colour"] = "red"
    path = tmp_path / "experts.jsonl"
    _write_lines(path, [bad])
    with pytest.raises(RecordError) as err:
        list(read_jsonl(path, Trajectory))
    assert f"{path}:1: field 'score'" in str(err.value) and f"{path}:1: field 'colour'" in str(err.value)


def test_future_schema_version_is_rejected(tmp_path):
    bad = _traj(0) | {"schema_version": 2}
    path = tmp_path / "experts.jsonl"
    _write_lines(path, [bad])
    with pytest.raises(RecordError, match="field 'schema_version'"):
        list(read_jsonl(path, Trajectory))


def test_pair_must_be_consistent():
    state = {"task_description": "t", "history": [], "step": 1, "observation": "o", "admissible_actions": ["a", "b"]}
    base = {
        "pair_id": "x/0#0",
        "state_id": "x/0",
        "benchmark": "alfworld",
        "state": state,
        "expert_action": "a",
        "alternative_action": "b",
        "candidates": ["b", "a"],
        "expert_index": 1,
        "candidates_admissible": [True, True],
        "policy": "random",
    }
    Pair.model_validate(base)
    with pytest.raises(ValueError, match="candidates\\[expert_index\\]"):
        Pair.model_validate(base | {"expert_index": 0})


def test_atomic_write_leaves_old_file_when_a_record_fails(tmp_path):
    path = tmp_path / "out.jsonl"
    write_jsonl(path, [Trajectory.model_validate(_traj(0))])
    before = path.read_bytes()

    def records():
        yield Trajectory.model_validate(_traj(1))
        raise RuntimeError("crash while producing records")

    with pytest.raises(RuntimeError):
        write_jsonl(path, records())
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left behind


def test_resumable_log_drops_a_torn_line_and_resumes(tmp_path):
    out = tmp_path / "experts.jsonl"
    log = ResumableJsonl(out, Trajectory, key="trajectory_id")
    log.append([Trajectory.model_validate(_traj(0)), Trajectory.model_validate(_traj(1))])
    log.close()
    with log.partial.open("a") as fh:  # a crash in the middle of a write
        fh.write(json.dumps(_traj(2))[:40])
    log = ResumableJsonl(out, Trajectory, key="trajectory_id")
    assert log.done_keys == {"scienceworld/boil/0", "scienceworld/boil/1"}
    log.append([Trajectory.model_validate(_traj(2))])
    assert log.finish() == out and not log.partial.exists()
    assert [t.variation for t in read_jsonl(out, Trajectory)] == [0, 1, 2]


def test_manifest_records_inputs_and_detects_edits(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("x\n")
    art = tmp_path / "out.jsonl"
    write_jsonl(art, [Trajectory.model_validate(_traj(0))])
    write_manifest(art, "experts", params={"k": 1}, counts={"n": 1}, inputs={"src": src})
    m = read_manifest(art)
    assert m["kind"] == "experts" and m["counts"] == {"n": 1} and len(m["inputs"]["src"]["sha256"]) == 64
    assert reusable(art, "experts", {"k": 1}) is not None
    assert reusable(art, "experts", {"k": 2}) is None
    art.write_text(art.read_text() + "\n")
    assert reusable(art, "experts", {"k": 1}) is None


def test_gzip_paths_round_trip_and_resume(tmp_path):
    out = tmp_path / "experts.jsonl.gz"
    recs = [Trajectory.model_validate(_traj(i)) for i in range(2)]
    write_jsonl(out, recs)
    assert out.read_bytes()[:2] == b"\x1f\x8b" and list(read_jsonl(out, Trajectory)) == recs
    log = ResumableJsonl(tmp_path / "more.jsonl.gz", Trajectory, key="trajectory_id")
    log.append(recs)
    assert log.partial.read_text().count("\n") == 2  # the partial file is plain text
    final = log.finish()
    assert list(read_jsonl(final, Trajectory)) == recs and not log.partial.exists()


def test_written_files_follow_the_umask_not_the_temp_files_0600(tmp_path):
    """Atomic writes go through a private temp file; the result gets the umask's mode, so teammates on a shared
    filesystem can read a run (a child process with umask 027 gets 0640, this one's 022 gives 0644)."""
    import stat
    import subprocess
    import sys

    from nemo_act.data.io import file_mode, follow_umask, write_jsonl, write_text_atomic

    write_text_atomic(tmp_path / "a.json", "{}\n")
    write_jsonl(tmp_path / "b.jsonl", [{"x": 1}])
    assert file_mode() == 0o666 & ~_umask()
    for name in ("a.json", "b.jsonl"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == file_mode()
    code = "from nemo_act.data.io import write_text_atomic as w; import sys; w(sys.argv[1], 'x')"
    subprocess.run(["bash", "-c", f'umask 027 && "{sys.executable}" -c "{code}" {tmp_path / "c.txt"}'], check=True)
    assert stat.S_IMODE((tmp_path / "c.txt").stat().st_mode) == 0o640
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "model.safetensors").write_bytes(b"x")
    (tmp_path / "sub" / "model.safetensors").chmod(0o600)  # as safetensors' save_file leaves it
    follow_umask(tmp_path)
    assert stat.S_IMODE((tmp_path / "sub" / "model.safetensors").stat().st_mode) == file_mode()


def _umask() -> int:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_broken_step_record_names_its_file_and_line(tmp_path):
    from nemo_act.data.io import RecordError, read_json

    path = tmp_path / "stage.json"
    path.write_text('{\n  "kind": "il",\n  "complete": tru\n}\n')
    with pytest.raises(RecordError, match=rf"{path}:3: not valid JSON .*delete it to redo that step"):
        read_json(path)
