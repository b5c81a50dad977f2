"""Local engine stages on a real tiny Qwen3 with TRL, and the pipeline runner's skip and resume."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM

from nemo_act import stage_data
from nemo_act.config import conf_root, load_config
from nemo_act.data import Pair, Trajectory, read_jsonl
from nemo_act.data.io import file_mode
from nemo_act.engines.local.reward_funcs import action_reward_funcs, selection_reward_funcs
from nemo_act.engines.local.signal_check import ZeroRewardVarianceWarning, ZeroVarianceWatch
from nemo_act.engines.local.stages import train_stage
from nemo_act.generation import RandomGenerator
from nemo_act.kinds.act import act_rows
from nemo_act.kinds.controls import dpo_rows, sft_choice_rows
from nemo_act.kinds.imitation import il_rows, rl_rows
from nemo_act.stage_data import stage_experiment
from nemo_act.steps.pairs import collect_pairs

QUICK = [
    "train.{k}.max_steps=2",
    "train.{k}.batch_size=4",
    "train.{k}.grad_accum=1",
    "train.{k}.logging_steps=1",
    "benchmark.max_admissible_shown=8",  # ~500-token prompts, not ~2,000: what is checked does not need the list
]
GRPO = ["train.{k}.num_generations=2", "train.{k}.max_completion_length=8", "train.{k}.zero_variance_steps=2"]
SFT = ["train.{k}.max_length=4096"]


def quick_cfg(kind: str, *extra: str):
    k = "act" if kind == "act_noreason" else kind
    more = GRPO if k in ("act", "rl") else SFT
    return load_config(overrides=[o.format(k=k) for o in QUICK + more] + list(extra))


@pytest.fixture(scope="module")
def random_pairs(sw_experts, tmp_path_factory):
    out = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), load_config(), out, k=2, progress=False)
    return out


def _rows(kind, cfg, sw_experts, random_pairs):
    scfg = stage_experiment(kind, cfg)
    if kind in ("il", "rl"):
        trajs = list(read_jsonl(sw_experts, Trajectory))
        return (il_rows if kind == "il" else rl_rows)(trajs, scfg)
    pairs = list(read_jsonl(random_pairs, Pair))
    builder = {
        "act": act_rows,
        "act_noreason": act_rows,
        "sft_choice": sft_choice_rows,
        "dpo": dpo_rows,
    }[kind]
    return builder(pairs, scfg)


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["act", "act_noreason", "il", "rl", "sft_choice", "dpo"])
def test_each_stage_trains_a_few_steps_and_writes_a_checkpoint(
    kind, tiny_model_dir, sw_experts, random_pairs, tmp_path
):
    cfg = quick_cfg(kind)
    rows = _rows(kind, cfg, sw_experts, random_pairs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ZeroRewardVarianceWarning)
        out = train_stage(kind, str(tiny_model_dir), rows, cfg, tmp_path / kind)
    model = AutoModelForCausalLM.from_pretrained(out)  # a loadable HF checkpoint
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    assert load_config(out / "config.yaml") == cfg
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir() if p.is_file()}
    assert set(modes.values()) == {file_mode()}, modes  # the umask's (0644 here), safetensors' 0600 too
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [h for h in history if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2]
    if kind in ("act", "act_noreason"):
        for part in ("accuracy", "admissible", "format", "selection_accuracy", "named_neither"):
            assert f"rewards/{part}/mean" in steps[0]
    if kind == "rl":
        assert "rewards/expert_match/mean" in steps[0]
    # an untrained model's groups often all score the same: then (and only then) the stage warns
    flat = kind in ("act", "act_noreason", "rl") and all(h["frac_reward_zero_std"] == 1.0 for h in steps)
    assert any(issubclass(w.category, ZeroRewardVarianceWarning) for w in caught) == flat
    before = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    changed = any((before[n] != p).any() for n, p in model.state_dict().items() if n in before)
    if kind not in ("act", "act_noreason", "rl"):  # GRPO may see zero advantage on an untrained model
        assert changed


def test_zero_variance_watch_warns_once_only_when_every_group_is_flat():
    from types import SimpleNamespace

    flat, mixed = {"frac_reward_zero_std": 1.0, "reward": 0.0}, {"frac_reward_zero_std": 0.5, "reward": 0.3}
    args = SimpleNamespace(logging_steps=1)

    def feed(watch, logs, first_step=1):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step, entry in enumerate(logs, start=first_step):
                watch.on_log(args, SimpleNamespace(global_step=step), None, logs=entry)
        return caught

    for logs, expected in (([flat, flat, flat, flat], 1), ([flat, mixed, flat], 0), ([flat, flat], 0), ([mixed], 0)):
        caught = feed(ZeroVarianceWatch("act", 3), logs)
        assert len(caught) == expected
        if expected:
            assert "first 3 logged steps" in str(caught[0].message) and "<action>" in str(caught[0].message)
    assert not feed(ZeroVarianceWatch("act", 0), [flat] * 5)
    assert not feed(ZeroVarianceWatch("act", 3), [flat] * 5, first_step=11)  # resumed at step 11: not its first steps


@pytest.mark.heavy
def test_act_rows_render_the_selection_prompt(random_pairs, cfg):
    pairs = list(read_jsonl(random_pairs, Pair))
    rows = act_rows(pairs, cfg)
    assert len(rows) == len(pairs)
    text = rows[0]["prompt"][0]["content"]
    assert f"Action 1: {pairs[0].candidates[0]}\nAction 2: {pairs[0].candidates[1]}" in text
    assert rows[0]["expert_index"] == pairs[0].expert_index
    no_reason = act_rows(pairs, stage_experiment("act_noreason", cfg))
    assert "Think about why" in text and "Think about why" not in no_reason[0]["prompt"][0]["content"]
    dpo = dpo_rows(pairs, cfg)[0]
    assert dpo["chosen"][0]["content"] == f"<action>{pairs[0].expert_action}</action>"
    assert dpo["rejected"][0]["content"] == f"<action>{pairs[0].alternative_action}</action>"


def test_reward_funcs_split_parts_and_monitors(cfg):
    funcs, weights = selection_reward_funcs(cfg)
    names = [f.__name__ for f in funcs]
    assert names == ["accuracy", "admissible", "format", "selection_accuracy", "named_neither"]
    assert weights == [1.0, 1.0, 1.0, 0.0, 0.0]
    completions = [
        [{"role": "assistant", "content": t}]
        for t in ["<action>b</action>", "<action>a</action>", "oops", "<action>z</action>"]
    ]
    kw = dict(
        candidates=[["a", "b"]] * 4,
        expert_index=[1] * 4,
        candidates_admissible=[[True, True]] * 4,
        admissible_actions=[["a", "b", "z"]] * 4,
    )
    got = {f.__name__: f([None] * 4, completions, **kw) for f in funcs}
    assert got["accuracy"] == [1.0, 0.0, 0.0, 0.0]
    assert got["admissible"] == [0.0, 0.1, 0.0, 0.0]
    assert got["format"] == [0.0, 0.0, -0.5, 0.0]
    assert got["named_neither"] == [0.0, 0.0, 0.0, 1.0]
    funcs, weights = action_reward_funcs(cfg)
    got = {
        f.__name__: f(
            [None],
            [[{"role": "assistant", "content": "<action>go</action>"}]],
            expert_action=["go"],
            admissible_actions=[["go"]],
        )
        for f in funcs
    }
    assert got["accuracy"] == [1.0] and got["expert_match"] == [1.0] and weights[-1] == 0.0


def _pipeline_cfg(tiny_model_dir, sw_experts, tmp_path, stages, *extra):
    return load_config(
        overrides=[
            f"pipeline.stages=[{','.join(stages)}]",
            f"pipeline.init={tiny_model_dir}",
            "pipeline.experts.tasks=[lifespan-longest-lived]",
            "pipeline.experts.split=test",
            "pipeline.experts.max_variations=1",
            "pipeline.eval.stages=none",
            "train.il.max_steps=3",
            "train.il.save_steps=1",
            "train.il.batch_size=2",
            "train.il.grad_accum=1",
            "train.il.max_length=4096",
            "benchmark.max_admissible_shown=8",
            f"run_dir={tmp_path / 'run'}",
            *extra,
        ]
    )


@pytest.mark.heavy
@pytest.mark.slow
def test_runner_skips_finished_stages_and_retrains_changed_ones(tiny_model_dir, sw_experts, tmp_path):
    from nemo_act.run.pipeline import PipelineRunner

    cfg = _pipeline_cfg(tiny_model_dir, sw_experts, tmp_path, ["il", "il"])
    first = PipelineRunner(cfg).run()
    assert [s["status"] for s in first["stages"]] == ["trained", "trained"]
    again = PipelineRunner(cfg).run()
    assert [s["status"] for s in again["stages"]] == ["skipped", "skipped"]
    changed = PipelineRunner(cfg.model_copy(update={"seed": 7})).run()
    assert [s["status"] for s in changed["stages"]] == ["trained", "trained"]
    info = json.loads((tmp_path / "run" / "stages" / "02_il" / "stage.json").read_text())
    assert info["complete"] and info["init"].endswith("01_il")
    history = json.loads((tmp_path / "run" / "run.json").read_text())["history"]  # every invocation, not the last
    assert [h["outcome"] for h in history] == ["finished"] * 3
    assert [h["stages"] for h in history] == [
        {"01_il": "trained", "02_il": "trained"},
        {"01_il": "skipped", "02_il": "skipped"},
        {"01_il": "trained", "02_il": "trained"},
    ]


@pytest.mark.heavy
def test_a_finished_stage_with_cut_weights_is_trained_again_and_a_stale_selection_is_remade(
    tiny_model_dir, sw_experts, random_pairs, tmp_path
):
    """``stage.json`` keeps each weight file's size and digest: a stage whose ``model.safetensors`` was cut short
    is trained again, saying why, not skipped into a SafetensorError in the next stage; a held-out selection is
    reused only for the checkpoint and pairs it was made with."""
    from nemo_act.run.pipeline import PipelineRunner

    cfg = _pipeline_cfg(tiny_model_dir, sw_experts, tmp_path, ["il"])
    PipelineRunner(cfg).run()
    stage = tmp_path / "run" / "stages" / "01_il"
    info = json.loads((stage / "stage.json").read_text())
    assert info["resumed"] is False and info["weights"]["model.safetensors"][0] > 0
    weights = stage / "model.safetensors"
    pairs = tmp_path / "heldout.jsonl"
    pairs.write_text("".join(random_pairs.read_text().splitlines(keepends=True)[:4]))
    runner = PipelineRunner(cfg)
    first = runner.selection("01_il", str(stage), pairs)
    assert runner.selection("01_il", str(stage), pairs) == first  # reused: same checkpoint, same pairs
    with weights.open("r+b") as fh:
        fh.truncate(weights.stat().st_size // 2)
    again = PipelineRunner(cfg)
    log = again.run()
    assert [s["status"] for s in log["stages"]] == ["trained"]
    AutoModelForCausalLM.from_pretrained(stage)  # whole again
    # retrained from the same inputs on a CPU: the same bytes, so the selection they made is still theirs
    assert again.selection("01_il", str(stage), pairs) == first


def _other_weights(stage, record: bool) -> str:
    """Put other weights into a finished stage, as another training of the same inputs would (a GPU's kernels, a
    copy from another machine): one tensor nudged. ``record``: its ``stage.json`` rewritten as a finished stage's
    (the stage retrained elsewhere and copied whole); else only the file replaced by hand. Returns their sha256."""
    from safetensors.torch import load_file, save_file

    from nemo_act.data.manifest import file_sha256
    from nemo_act.run.cache import weights_record

    path = stage / "model.safetensors"
    tensors = load_file(path)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 0.01
    save_file(tensors, path, metadata={"format": "pt"})
    if record:
        info = json.loads((stage / "stage.json").read_text())
        info["weights"] = weights_record(stage)
        (stage / "stage.json").write_text(json.dumps(info))
    return file_sha256(path)


@pytest.mark.heavy
def test_an_evaluation_and_a_selection_are_reused_only_for_the_weights_they_used(
    tiny_model_dir, sw_experts, random_pairs, tmp_path
):
    """Issue 45: a finished evaluation was reused by its stage's inputs, not by the weights it played, so weights
    replaced by another training of the same inputs kept the old episodes and scores. Each records the sha256 of
    the weights it used and is redone, with one line saying why, when they differ: after a finished evaluation,
    after one cut short (no old episode is kept), with the stage record rewritten or the file replaced by hand."""
    import io

    from rich.console import Console

    from nemo_act.data.manifest import file_sha256
    from nemo_act.run.pipeline import PipelineRunner

    cfg = _pipeline_cfg(
        tiny_model_dir, sw_experts, tmp_path, ["il"],
        "pipeline.eval.split=test", "pipeline.eval.tasks=[lifespan-longest-lived]", "pipeline.eval.max_variations=1",
        "pipeline.eval.workers=1", "pipeline.eval.envs_per_worker=1", "eval.seeds=[0]", "benchmark.max_steps=3",
    )  # fmt: skip
    PipelineRunner(cfg).run()
    stage = tmp_path / "run" / "stages" / "01_il"
    pairs = tmp_path / "heldout.jsonl"
    pairs.write_text("".join(random_pairs.read_text().splitlines(keepends=True)[:4]))
    said = io.StringIO()
    runner = PipelineRunner(cfg, console=Console(file=said, width=300))
    episodes = tmp_path / "run" / "eval" / "01_il" / "seed_0" / "episodes.jsonl"

    first = runner.evaluate("01_il", str(stage))
    selected = runner.selection("01_il", str(stage), pairs)
    sha = file_sha256(stage / "model.safetensors")
    assert first["weights"] == selected["weights"] == {"model.safetensors": sha}
    assert runner.evaluate("01_il", str(stage)) == first and runner.selection("01_il", str(stage), pairs) == selected
    assert "skip evaluation of 01_il: finished with the same inputs, weights and config" in said.getvalue()

    for record in (True, False):
        said.truncate(0)
        new = _other_weights(stage, record)
        redone = runner.evaluate("01_il", str(stage))["weights"]
        assert redone == runner.selection("01_il", str(stage), pairs)["weights"] == {"model.safetensors": new}
        text = said.getvalue()
        assert "redo evaluation of 01_il: its checkpoint's weights are not the ones it used" in text
        assert "redo held-out selection of 01_il: its checkpoint's weights are not the ones it used" in text
        assert len(episodes.read_text().splitlines()) == 1  # played again, not appended to the old weights' episode

    # an evaluation cut short, then other weights: the episodes it had played are not kept
    (tmp_path / "run" / "eval" / "01_il" / "summary.json").unlink()
    (tmp_path / "run" / "eval" / "01_il" / "seed_0" / "summary.json").unlink()
    stale = episodes.read_text()
    said.truncate(0)
    _other_weights(stage, record=True)
    runner.evaluate("01_il", str(stage))
    assert "redo evaluation of 01_il: its checkpoint's weights are not the ones it used" in said.getvalue()
    assert len(episodes.read_text().splitlines()) == 1 and episodes.read_text() != stale


@pytest.mark.heavy
def test_a_stage_stopped_at_a_deadline_stays_unfinished_and_nemo_act_run_exits_75(
    tiny_model_dir, sw_experts, tmp_path, monkeypatch, capsys
):
    """Issue 56: an engine that stops a stage at the job's save deadline (the cluster engine's launcher raises
    ``StageStopped``: tests/test_nemo_rl_recipes.py) leaves it unfinished: the runner writes no complete marker and
    keeps its checkpoints for the resume, and ``nemo-act run`` ends with 75 and one line, which the Slurm job answers
    with a requeue (tests/test_slurm.py). The next run trains the stage."""
    from nemo_act import cli
    from nemo_act.config import to_yaml
    from nemo_act.engines import StageStopped, engine_for

    cfg = _pipeline_cfg(tiny_model_dir, sw_experts, tmp_path, ["il"])
    config = tmp_path / "run.yaml"
    config.write_text(to_yaml(cfg))
    engine = engine_for(cfg)
    trains = engine.train_stage

    def stops(kind, init, rows, cfg, out):
        (Path(out) / "checkpoints" / "checkpoint-1").mkdir(parents=True)
        raise StageStopped(f"stage {Path(out).name} ({kind}) stopped at its save deadline after step 1")

    monkeypatch.setattr(engine, "train_stage", stops)
    assert cli.main(["run", str(config)]) == 75
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "stopped: stage 01_il (il) stopped at its save deadline after step 1"
    stage = tmp_path / "run" / "stages" / "01_il"
    assert not json.loads((stage / "stage.json").read_text()).get("complete")
    assert (stage / "checkpoints" / "checkpoint-1").is_dir()
    last = json.loads((tmp_path / "run" / "invocations.jsonl").read_text().splitlines()[-1])
    assert last["event"] == "failed" and last["error"].startswith("StageStopped: stage 01_il")
    monkeypatch.setattr(engine, "train_stage", trains)
    shutil.rmtree(stage / "checkpoints")  # the stand-in's checkpoint is no TRL checkpoint to resume from
    assert cli.main(["run", str(config)]) == 0
    assert json.loads((stage / "stage.json").read_text())["complete"]


@pytest.mark.heavy
def test_a_run_folder_moved_or_copied_elsewhere_reuses_what_it_finished(tiny_model_dir, sw_experts, tmp_path):
    """Issue 56: the starting folder of a run (here the tiny model inside the run's own folder, as the demo's warm-up
    is) was fingerprinted by its path, sizes and times, so a run moved to another file system or copied to start a
    study from it trained every stage again. It is known by its content now: the moved run and a copy of it reuse
    their stage and its evaluation, and a changed weight file in the copy's starting folder is noticed."""
    import io
    import shutil

    from rich.console import Console

    from nemo_act.run.pipeline import PipelineRunner

    def run(root: Path) -> tuple[dict, str]:
        cfg = _pipeline_cfg(
            root / "start", sw_experts, root, ["il"],
            "pipeline.eval.split=test", "pipeline.eval.tasks=[lifespan-longest-lived]",
            "pipeline.eval.max_variations=1", "pipeline.eval.workers=1", "pipeline.eval.envs_per_worker=1",
            "pipeline.eval.stages=all", "eval.seeds=[0]", "benchmark.max_steps=2",
        )  # fmt: skip
        said = io.StringIO()
        log = PipelineRunner(cfg, console=Console(file=said, width=300)).run()
        return log, said.getvalue()

    first = tmp_path / "scratch"
    shutil.copytree(tiny_model_dir, first / "start")
    log, _ = run(first)
    assert [s["status"] for s in log["stages"]] == ["trained"]
    project = tmp_path / "project"
    shutil.move(first, project)  # a finished run moved to another path (mtimes kept, as mv and rsync -a keep them)
    log, said = run(project)
    assert [s["status"] for s in log["stages"]] == ["skipped"], said
    assert "skip evaluation of 01_il" in said and "redo" not in said
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    _other_weights(copy / "start", record=False)  # the copy's starting weights edited: its stage is no longer theirs
    log, said = run(copy)
    assert [s["status"] for s in log["stages"]] == ["trained"], said


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.repeat(
    "tests/test_runlock.py::test_two_runs_on_one_folder",  # `nemo-act run` killed after a checkpoint: "resumed"
    "tests/test_exact_resume.py::test_a_stage_killed_at_each_checkpoint_resumes_to_the_uninterrupted_weights[il]",
    "tests/test_cli.py::test_ctrl_c_stops_a_run_with_one_line_exit_130_and_history_interrupted",
)
def test_killed_stage_resumes_from_its_last_checkpoint(tiny_model_dir, sw_experts, tmp_path):
    """`nemo-act run` is killed (SIGKILL) after a TRL checkpoint is written, then re-run."""
    pipeline = tmp_path / "il.yaml"
    pipeline.write_text(f"defaults:\n  - {conf_root() / 'config.yaml'}\n")
    overrides = [
        "pipeline.stages=[il]",
        f"pipeline.init={tiny_model_dir}",
        "pipeline.experts.tasks=[lifespan-longest-lived]",
        "pipeline.experts.split=test",
        "pipeline.experts.max_variations=1",
        "pipeline.eval.stages=none",
        "train.il.max_steps=30",
        "train.il.save_steps=2",
        "benchmark.max_admissible_shown=8",  # short prompts: the resume is what is checked, not their length
        "train.il.batch_size=2",
        "train.il.grad_accum=1",
        "train.il.max_length=4096",
    ]
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "nemo_act.cli", "run", str(pipeline), "--run-dir", str(run), *overrides]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpts = run / "stages" / "01_il" / "checkpoints"
    deadline = time.time() + 300
    while time.time() < deadline and not any(ckpts.glob("checkpoint-*/trainer_state.json")):
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert any(ckpts.glob("checkpoint-*")), "the kill must land after a checkpoint"
    assert not json.loads((run / "stages" / "01_il" / "stage.json").read_text())["complete"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    log = json.loads((run / "run.json").read_text())
    assert log["stages"][0]["status"] == "resumed"
    assert "missing keys in the checkpoint" not in res.stderr  # tied lm_head: restored by the tie, not reported
    killed, resumed = log["history"]  # the killed invocation is in the record too
    assert killed["outcome"] == "interrupted" and killed["ended"] is None and killed["stages"] == {"01_il": "training"}
    assert resumed["outcome"] == "finished" and resumed["stages"] == {"01_il": "resumed"}
    history = [json.loads(x) for x in (run / "stages" / "01_il" / "metrics.jsonl").read_text().splitlines()]
    assert max(h["step"] for h in history) == 30
    assert not ckpts.exists()  # cleaned once the stage finished


@pytest.mark.heavy
@pytest.mark.slow
def test_pairs_from_a_warmed_tiny_model(warm_tiny_model, sw_experts, tmp_path):
    """After a short IL warm-up the tiny model writes parsable actions; its pairs keep every invariant."""
    from nemo_act.generation.hf import HFGenerator

    cfg = load_config(overrides=["pairs.sampling.max_new_tokens=24", "benchmark.max_admissible_shown=8"])
    warm = warm_tiny_model
    out = tmp_path / "pairs.jsonl"
    c = collect_pairs(
        sw_experts, HFGenerator(cfg.model, cfg.generation, str(warm)), cfg, out, k=6, progress=False
    ).counts
    assert c["dropped_unparsable"] < c["sampled"] / 2, c  # it learned the format
    assert c["pairs"] > 0, c
    pairs = list(read_jsonl(out, Pair))
    assert all(p.alternative_action.strip().lower() != p.expert_action.strip().lower() for p in pairs)
    assert c["expert_first"] == sum(p.expert_index == 0 for p in pairs)
    assert 0 < c["expert_first"] < c["pairs"] or c["pairs"] < 4


@pytest.mark.heavy
def test_selection_format_rows_carry_no_label(random_pairs, cfg):
    """The demo's format rows name a candidate chosen by a coin flip, independent of the expert."""
    pairs = list(read_jsonl(random_pairs, Pair))
    rows = stage_data.selection_format_rows(pairs, cfg, seed=0)
    targets = [r["completion"][0]["content"] for r in rows]
    assert all(t in (f"<action>{c}</action>" for c in p.candidates) for t, p in zip(targets, pairs, strict=True))
    expert = sum(t == f"<action>{p.expert_action}</action>" for t, p in zip(targets, pairs, strict=True))
    assert 0.2 < expert / len(pairs) < 0.8


@pytest.mark.heavy
@pytest.mark.slow
def test_cluster_mode_runs_gpu_steps_in_child_processes_with_the_same_results(tiny_model_dir, sw_experts, tmp_path):
    """On the cluster engine the runner runs pairs, selection and eval in their own processes (vLLM must
    give its GPU memory back before the next NeMo-RL stage); the files are those of the in-process path."""
    from nemo_act.run.pipeline import PipelineRunner

    cfg = _pipeline_cfg(
        tiny_model_dir, sw_experts, tmp_path, ["il"], "pipeline.pairs_policy=random",
        "train.act.max_completion_length=16",  # free answers of an untrained model run to the cap: 1,024 by default
    )  # fmt: skip
    results = []
    for isolate in (True, False):
        runner = PipelineRunner(cfg, tmp_path / f"run_{isolate}")
        runner.isolate = isolate
        pairs = runner.pairs(sw_experts, "pairs.jsonl")
        sel = runner.selection("init", str(tiny_model_dir), pairs)
        results.append((pairs.read_text(), sel["free"], sel["forced"]))
    assert results[0] == results[1] and results[0][0]


def test_resume_skips_a_checkpoint_cut_short_by_a_kill(tmp_path):
    """SIGKILL while TRL writes checkpoint-N leaves it without a whole trainer_state.json: resume from N-2."""
    from nemo_act.engines.local.stages import _last_checkpoint

    ckpts = tmp_path / "checkpoints"
    for step, state in ((2, '{"global_step": 2}'), (4, '{"global_step": 4}'), (6, '{"global_st')):
        (ckpts / f"checkpoint-{step}").mkdir(parents=True)
        (ckpts / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
    (ckpts / "checkpoint-8").mkdir()  # killed before its state was written
    assert _last_checkpoint(tmp_path) == str(ckpts / "checkpoint-4")
    assert sorted(p.name for p in ckpts.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    assert _last_checkpoint(tmp_path / "none") is None


def test_the_resume_warning_about_tied_weights_is_dropped_and_others_are_kept():
    import logging

    from nemo_act.engines.local.stages import _TiedWeightsFilter

    flt = _TiedWeightsFilter({"lm_head.weight"})

    def record(keys):
        msg = f"There were missing keys in the checkpoint model loaded: {keys}."
        return logging.LogRecord("transformers.trainer", logging.WARNING, __file__, 1, msg, None, None)

    assert not flt.filter(record(["lm_head.weight"]))
    assert flt.filter(record(["lm_head.weight", "model.norm.weight"]))  # a real loss is still reported
    assert _TiedWeightsFilter(set()).filter(record(["lm_head.weight"]))  # untied: lm_head missing is real
