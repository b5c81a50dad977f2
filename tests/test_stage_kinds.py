"""The stage-kind table is the one place that says what a kind is: every consumer follows it."""

import json
import os
from pathlib import Path

import pytest

from nemo_act.common.plugins import load
from nemo_act.config import ConfigError, load_config
from nemo_act.engines.nemo_rl import recipe
from nemo_act.engines.nemo_rl.processors import task_name
from nemo_act.stage_data import stage_config, stage_experiment
from nemo_act.stage_kinds import DATA_KINDS, STAGE_KINDS, data_steps, needs_pairs, stage_kind


@pytest.mark.parametrize("name", list(STAGE_KINDS))
def test_every_kind_has_its_builder_hyperparameters_and_a_cluster_mapping(name):
    spec, cfg = stage_kind(name), load_config(overrides=["engine=nemo_rl", "generation=vllm", "train=cluster"])
    assert callable(load(spec.rows))  # a shipped kind names its builder as an extension's does
    own, sc = getattr(cfg.train, spec.train), stage_config(name, cfg)
    budget = getattr(cfg.train, spec.budget_of or spec.train)  # il_matched: IL's settings with ACT's step budget
    assert sc.model_dump() == own.model_dump() | {"epochs": budget.epochs, "max_steps": budget.max_steps}
    assert (spec.reward is not None) == (spec.algorithm == "grpo")  # GRPO needs a reward; SFT and DPO none
    m = recipe.master_config(name, cfg, {}, init="/ckpt", out="/runs/x", n_rows=100)
    assert ("grpo" in m) == (spec.algorithm == "grpo") and ("dpo" in m) == (spec.algorithm == "dpo")
    assert task_name(name)  # routes its rows in NeMo-RL
    for key, value in spec.prompt_settings.items():
        assert getattr(stage_experiment(name, cfg).prompt, key) == value


def test_the_schema_reads_the_table():
    with pytest.raises(ConfigError, match=r"unknown stage 'actt'; stages are: act, act_onpolicy, act_noreason"):
        load_config(overrides=["pipeline.stages=[actt,il]"])
    assert load_config(overrides=["pipeline.stages=[dpo,il]"]).pipeline.stages == ["dpo", "il"]


def test_the_runner_derives_its_data_steps_from_the_stages():
    assert needs_pairs(["act", "il", "rl"]) and needs_pairs(["dpo"]) and not needs_pairs(["il", "rl"])
    assert data_steps(["il", "rl"]) == ["experts"]
    assert data_steps(["ee", "rl"]) == data_steps(["ee_wm"]) == ["experts", "early_experience"]
    assert data_steps(["act", "ee"]) == ["experts", "pairs", "early_experience"]
    assert data_steps(["sand", "rl"]) == ["experts", "sand"]


@pytest.mark.parametrize("kind", sorted({k.data for k in STAGE_KINDS.values()}))
def test_every_data_kind_names_how_it_is_built_and_read(kind):
    """A built kind names an importable builder and record type, an audit file and its config block."""
    spec = DATA_KINDS[kind]
    if spec.builder is None:
        assert kind in ("experts", "pairs") and spec.audit is spec.record is spec.config is None
        return
    cfg = load_config()
    assert callable(load(spec.builder)) and spec.audit.endswith(".jsonl")
    assert load(spec.record).model_fields["state_id" if kind != "agent_r" else "trajectory_id"]
    assert getattr(cfg, spec.config) is not None


def test_a_baseline_stage_retrains_when_its_data_settings_change(tmp_path):
    """A row-mixing setting changes no audit file (the same reflections), so it is part of the fingerprint of
    the stages that read that data kind, and of no other stage."""
    from nemo_act.run.cache import stage_fingerprint

    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    cfg = load_config()
    other = load_config(overrides=["early_experience.expert_rows_per_reflection=2.0"])
    assert stage_fingerprint("ee", "random", data, cfg) != stage_fingerprint("ee", "random", data, other)
    assert stage_fingerprint("ee_wm", "random", data, cfg) != stage_fingerprint("ee_wm", "random", data, other)
    assert stage_fingerprint("il", "random", data, cfg) == stage_fingerprint("il", "random", data, other)
    assert stage_fingerprint("sand", "random", data, cfg) == stage_fingerprint("sand", "random", data, other)


def test_a_kill_between_training_and_cleanup_never_retrains_the_stage(tmp_path, monkeypatch):
    """pipeline.run_stage deleted checkpoints/ before it wrote ``complete: true``: a kill between the two lost
    both, and the rerun trained the whole stage again. The engine here is a stand-in that leaves what a
    trained stage leaves (an HF folder and its checkpoints/); the kill is an exception raised the moment the
    runner removes checkpoints/."""
    import shutil as shutil_module

    from nemo_act.config import load_config
    from nemo_act.run import pipeline

    trained = []

    def engine(kind, init, rows, cfg, out):
        trained.append(kind)
        (Path(out) / "checkpoints" / "checkpoint-4").mkdir(parents=True, exist_ok=True)
        (Path(out) / "config.json").write_text("{}")
        return Path(out)

    data = tmp_path / "rows.jsonl"
    data.write_text("x\n")
    rows = [{"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]}]
    runner = pipeline.PipelineRunner(load_config(), tmp_path / "run")
    monkeypatch.setattr(runner.engine, "train_stage", engine)
    real_rmtree = shutil_module.rmtree

    def killed(path, *args, **kwargs):
        if Path(path).name == "checkpoints":
            marker = json.loads((Path(path).parent / "stage.json").read_text())
            assert marker["complete"], "checkpoints/ went before the stage was marked complete"
            raise KeyboardInterrupt  # the job is killed right here
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(pipeline.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        runner.run_stage(2, "il", "/ckpt/warm", {}, rows=rows, data=data)
    monkeypatch.setattr(pipeline.shutil, "rmtree", real_rmtree)
    out = pipeline.PipelineRunner(load_config(), tmp_path / "run").run_stage(
        2, "il", "/ckpt/warm", {}, rows=rows, data=data
    )
    assert trained == ["il"]  # skipped on the rerun, not retrained
    assert not (Path(out) / "checkpoints").exists()  # the leftover went then


ECHO_EXTENSION = """
from pathlib import Path

from pydantic import BaseModel

from nemo_act.data.io import read_all, write_jsonl
from nemo_act.data.manifest import Summary, write_manifest
from nemo_act.data.records import Trajectory
from nemo_act.prompts.render import as_messages, generation_prompt
from nemo_act.prompts.state import trajectory_state
from nemo_act.stage_kinds import DataKind, StageKind, register


class Echo(BaseModel):
    trajectory_id: str
    index: int
    action: str


def build_echo(cfg, experts, generator, folder, workers):
    trajs = read_all(experts, Trajectory, "expert trajectories")
    records = [Echo(trajectory_id=t.trajectory_id, index=i, action=s.action.upper())
               for t in trajs for i, s in enumerate(t.steps)]
    out = Path(folder) / "echo.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(out, records)
    counts = {"kept": len(records), "states": len(records), "dropped": {}}
    write_manifest(out, "echo", {}, counts, inputs={"experts": experts})
    return Summary(counts=counts, out=out)


def echo_rows(records, trajectories, cfg):
    by_id = {t.trajectory_id: t for t in trajectories}
    rows = []
    for r in records:
        t = by_id[r.trajectory_id]
        state = trajectory_state(t, r.index, cfg.prompt.history_k, cfg.benchmark.max_admissible_shown)
        rows.append({"prompt": as_messages(generation_prompt(state, t.benchmark, cfg.prompt)),
                     "completion": [{"role": "assistant", "content": f"<action>{r.action}</action>"}]})
    return rows


register(DataKind("echo", "echo_ext:build_echo", "echo.jsonl", "echo_ext:Echo", None, env=False,
                  summary="{kept} of {states} echoed -> {out}"))
register(StageKind(name="sft_echo", algorithm="sft", data="echo", rows="echo_ext:echo_rows", prompt="generation",
                   train="il"))
"""


@pytest.mark.heavy
def test_a_data_kind_and_its_stage_registered_from_outside_run_in_the_pipeline_and_the_cli(
    tiny_model_dir, sw_experts, tmp_path, monkeypatch
):
    """A data kind of the user's (builder, record type, audit file; built from the trajectories alone, so no env
    episodes are required) and a stage kind consuming it, both from an ``extensions`` module outside nemo-act: the
    runner builds the data, trains the stage on the rows the user's builder makes, and ``nemo-act reflection``
    builds it by name with the kind's own summary line."""
    import os
    import subprocess
    import sys

    from nemo_act import stage_kinds
    from nemo_act.config import load_config
    from nemo_act.run.pipeline import PipelineRunner

    (tmp_path / "echo_ext.py").write_text(ECHO_EXTENSION)
    monkeypatch.syspath_prepend(str(tmp_path))
    for table, name in ((stage_kinds.STAGE_KINDS, "sft_echo"), (stage_kinds.DATA_KINDS, "echo")):
        monkeypatch.setitem(table, name, None)  # undone last: the entry the test registers is removed after it
        monkeypatch.delitem(table, name)
    monkeypatch.delitem(sys.modules, "echo_ext", raising=False)
    cfg = load_config(overrides=[
        "extensions=[echo_ext]", "pipeline.stages=[sft_echo]", f"pipeline.init={tiny_model_dir}",
        f"pipeline.experts.path={sw_experts}", "pipeline.eval.stages=none", "train=smoke",
        f"run_dir={tmp_path / 'run'}",
    ])  # fmt: skip
    log = PipelineRunner(cfg).run()
    assert [s["stage"] for s in log["stages"]] == ["01_sft_echo"] and log["stages"][0]["status"] == "trained"
    audit = tmp_path / "run" / "data" / "echo" / "echo.jsonl"
    assert audit.is_file() and all(r.isupper() for r in (json.loads(x)["action"] for x in audit.open()))
    cli = subprocess.run(
        [sys.executable, "-m", "nemo_act.cli", "reflection", "echo", "--experts", str(sw_experts), "--policy", "random",
         "--out", str(tmp_path / "cli"), "extensions=[echo_ext]"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path), "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr[-2000:]
    n = sum(1 for _ in (tmp_path / "cli" / "echo.jsonl").open())
    assert f"{n} of {n} echoed -> " in cli.stdout
    ls = subprocess.run(
        [sys.executable, "-m", "nemo_act.cli", "ls", "extensions=[echo_ext]"], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"},
    )  # fmt: skip
    rows = [" ".join(line.replace("│", " ").split()) for line in ls.stdout.splitlines()]
    assert "sft_echo sft on echo echo_ext" in rows and "echo echo.jsonl echo_ext" in rows  # the user's, named
    assert "act grpo on pairs, reward selection nemo_act.kinds.act" in rows


@pytest.mark.heavy
def test_onpolicy_act_samples_each_rounds_alternatives_with_the_checkpoint_it_starts_from(
    warm_tiny_model, sw_experts, tmp_path
):
    """``act_onpolicy`` with ``pairs.rounds=2`` (issue 44's on-policy hard negatives): round 1's pairs are sampled by
    the initial policy (the pairs ``act`` trains on), round 2's by round 1's checkpoint; each round is followed by
    held-out selection; IL then starts from round 2."""
    from nemo_act.config import load_config
    from nemo_act.data import read_manifest
    from nemo_act.run.pipeline import PipelineRunner

    run = tmp_path / "run"
    cfg = load_config("conf/pipeline/act_onpolicy_il.yaml", [
        f"pipeline.init={warm_tiny_model}", f"pipeline.experts.path={sw_experts}",
        f"pipeline.heldout.path={sw_experts}", "pipeline.eval.stages=none", "train=smoke", f"run_dir={run}",
    ])  # fmt: skip
    assert cfg.pairs.rounds == 2
    log = PipelineRunner(cfg).run()
    assert [s["stage"] for s in log["stages"]] == ["01_act_onpolicy", "02_act_onpolicy", "03_il"]
    first = read_manifest(run / "data" / "policy_pairs" / "01_act_onpolicy" / "pairs.jsonl")
    second = read_manifest(run / "data" / "policy_pairs" / "02_act_onpolicy" / "pairs.jsonl")
    assert first["params"]["policy"] == str(warm_tiny_model)
    assert second["params"]["policy"] == str(run / "stages" / "01_act_onpolicy")
    assert first["counts"]["pairs"] > 0 and second["counts"]["pairs"] > 0
    assert not (run / "data" / "pairs.jsonl").exists()  # round 1 samples its own: no train pairs sampled twice
    assert set(log["selection"]) == {"init", "01_act_onpolicy", "02_act_onpolicy"}
    from nemo_act.report import load_run
    from nemo_act.run.demo import summary_markdown

    summary = summary_markdown([load_run(run)])  # what `make demo` writes, from selection results as written
    assert sum(line.startswith(("| initial policy", "| act_onpolicy_il: 0")) for line in summary.splitlines()) == 3


# One stage kind, the same module text inside nemo-act (a module of nemo_act.kinds) and outside it (a module the
# config's `extensions` names): IL on the last expert state of each trajectory.
KIND_MODULE = '''"""IL on the last expert state of each trajectory (a stage kind added by tests/test_stage_kinds.py)."""

from collections.abc import Sequence

from nemo_act.config.schema import ExperimentConfig
from nemo_act.data.records import Trajectory
from nemo_act.kinds.imitation import il_rows
from nemo_act.stage_data import Row
from nemo_act.stage_kinds import StageKind, register


def final_rows(trajectories: Sequence[Trajectory], cfg: ExperimentConfig) -> list[Row]:
    """The IL row of each trajectory's last state."""
    return [il_rows([t], cfg)[-1] for t in trajectories]


register(
    StageKind(
        name="il_final",
        algorithm="sft",
        data="experts",
        rows=f"{__name__}:final_rows",
        prompt="generation",
        train="il",
        label="IL on final states",
        summary="IL on the last expert state of each trajectory",
    )
)
'''
PIPELINE = "defaults:\n  - ../config.yaml\n  - _self_\n{extensions}pipeline:\n  name: il_final\n  stages: [il_final]\n"
ROWS_OF = (
    "import json, sys\n"
    "from nemo_act.config import load_config\n"
    "from nemo_act.stage_data import rows_for\n"
    "from nemo_act.stage_kinds import stage_kind\n"
    "cfg = load_config(sys.argv[1])\n"
    "print(json.dumps({'rows': rows_for('il_final', sys.argv[2], cfg), 'builder': stage_kind('il_final').rows,\n"
    "                  'label': stage_kind('il_final').label}))\n"
)


def test_a_kind_is_one_module_and_one_yaml_inside_nemo_act_or_outside_it(tmp_path):
    """The same module adds a stage kind to a copy of nemo-act (dropped into ``nemo_act/kinds/``, with its pipeline in
    ``conf/pipeline/``: no other file of the copy changes) and from outside it (a module named in ``extensions``, its
    pipeline in a ``NEMO_ACT_CONF`` folder): both runs' plans name the stage, and its rows are what the builder
    makes, the same both ways."""
    import shutil
    import subprocess
    import sys

    from conftest import REPO, SW_EXPERTS

    from nemo_act.data import Trajectory, read_jsonl
    from nemo_act.kinds.imitation import il_rows

    inside = tmp_path / "checkout"
    for part in ("nemo_act", "conf"):
        shutil.copytree(REPO / part, inside / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(REPO / "pyproject.toml", inside / "pyproject.toml")  # a checkout: its conf/ is the packaged one
    (inside / "nemo_act" / "kinds" / "il_final.py").write_text(KIND_MODULE)
    (inside / "conf" / "pipeline" / "il_final.yaml").write_text(PIPELINE.format(extensions=""))
    outside = tmp_path / "mine"
    (outside / "myconf" / "pipeline").mkdir(parents=True)
    (outside / "il_final_ext.py").write_text(KIND_MODULE)
    (outside / "myconf" / "pipeline" / "il_final.yaml").write_text(
        PIPELINE.format(extensions="extensions: [il_final_ext]\n")
    )

    def run(pythonpath: Path, conf: str, pipeline: Path) -> tuple[dict, str]:
        env = {**os.environ, "PYTHONPATH": str(pythonpath), "NEMO_ACT_CONF": conf, "HF_HUB_OFFLINE": "1"}
        rows = subprocess.run([sys.executable, "-c", ROWS_OF, str(pipeline), str(SW_EXPERTS)], env=env, cwd=tmp_path,
                              capture_output=True, text=True)  # fmt: skip
        assert rows.returncode == 0, rows.stderr[-3000:]
        plan = subprocess.run(
            [sys.executable, "-m", "nemo_act.cli", "run", str(pipeline), "--run-dir", str(tmp_path / "run"),
             f"pipeline.experts.path={SW_EXPERTS}", "pipeline.init=random"],
            env={**env, "NEMO_ACT_DRY_RUN": "1"}, cwd=tmp_path, capture_output=True, text=True,
        )  # fmt: skip
        assert plan.returncode == 0, plan.stderr[-3000:]
        return json.loads(rows.stdout), plan.stdout

    mine, mine_plan = run(inside, "", inside / "conf" / "pipeline" / "il_final.yaml")
    theirs, their_plan = run(outside, str(outside / "myconf"), outside / "myconf" / "pipeline" / "il_final.yaml")
    assert mine["builder"] == "nemo_act.kinds.il_final:final_rows" and theirs["builder"] == "il_final_ext:final_rows"
    assert "01_il_final" in mine_plan and "01_il_final" in their_plan
    cfg = load_config()
    want = [il_rows([t], cfg)[-1] for t in read_jsonl(SW_EXPERTS, Trajectory)]
    assert mine["rows"] == theirs["rows"] == json.loads(json.dumps(want)) and len(want) == 2


def test_a_built_data_file_whose_manifest_names_no_experts_is_one_line_naming_it(tmp_path):
    """Issue 56: ``rows_for`` reads a built data file's manifest for the experts it was made from, and raised a bare
    ``KeyError: 'experts'`` when handed another file (the twin's fixture gave ``act_onpolicy`` the experts file): now
    one line names the stage, the file, what its manifest lacks and which builder writes the file it reads."""
    from nemo_act.data.manifest import write_manifest
    from nemo_act.stage_data import rows_for

    cfg = load_config()
    experts = tmp_path / "experts.jsonl"
    experts.write_text("")
    with pytest.raises(ValueError, match=r"^stage act_onpolicy reads .*experts\.jsonl, but it has no manifest \("):
        rows_for("act_onpolicy", experts, cfg)
    write_manifest(experts, "experts", {"split": "train"}, {"trajectories": 0})  # an experts file's own manifest
    with pytest.raises(ValueError) as err:
        rows_for("act_onpolicy", experts, cfg)
    assert str(err.value) == (
        f"stage act_onpolicy reads {experts}, but its manifest ({experts}.manifest.json) names no inputs.experts: "
        "give it the file its data builder nemo_act.steps.pairs:build_policy_pairs writes"
    )
