"""Cluster engine against NeMo-RL itself: our reward environments registered in NeMo-RL's registries,
created by its ``create_env`` and scored by its rollout's ``calculate_rewards``, under a real local Ray.

NeMo-RL is not on PyPI (release container or a checkout of the tag pinned in
``conf/engine/_nemo_rl_pin.yaml``), so ``make test`` and CI skip this file with the reason;
``make test-cluster NEMO_RL_SOURCE=<your checkout>`` runs it (and fails it where NeMo-RL is missing).
"""

import json

import pytest
from needs_nemo_rl import import_nemo_rl

pytestmark = pytest.mark.heavy  # a real local Ray, the JVM's experts, the tiny model (tests/conftest.py)

nemo_rl = import_nemo_rl()

import ray  # noqa: E402
import torch  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from nemo_act.data import Pair, read_jsonl  # noqa: E402
from nemo_act.engines.nemo_rl.processors import grpo_datum  # noqa: E402
from nemo_act.generation import RandomGenerator  # noqa: E402
from nemo_act.kinds.act import act_rows  # noqa: E402
from nemo_act.kinds.controls import dpo_rows  # noqa: E402
from nemo_act.kinds.imitation import il_rows  # noqa: E402
from nemo_act.stage_kinds import STAGE_KINDS, stage_kind  # noqa: E402
from nemo_act.steps.pairs import collect_pairs  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # isolated cluster
    yield
    ray.shutdown()


def test_registered_selection_env_scores_a_rollout_batch(local_ray, sw_experts, tiny_model_dir, cfg, tmp_path):
    from nemo_rl.distributed.batched_data_dict import BatchedDataDict
    from nemo_rl.environments.utils import create_env
    from nemo_rl.experience.rollouts import calculate_rewards

    from nemo_act.engines.nemo_rl.environments import ENVIRONMENTS, register

    register()
    register()  # idempotent
    env = create_env(
        "act_selection",
        {"values": cfg.rewards.selection.model_dump(), "use_admissible": cfg.benchmark.admissible_reward},
    )
    pairs_file = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, pairs_file, progress=False)
    pairs = list(read_jsonl(pairs_file, Pair))[:4]
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = act_rows(pairs, cfg)
    datums = [grpo_datum(r, i, tok, "act_selection", 8192, cfg.model.enable_thinking) for i, r in enumerate(rows)]
    answers = [f"<action>{pairs[0].expert_action}</action>", "<action>x</action>", "oops", "<action>y</action>"]
    answers[3] = f"<action>{pairs[3].alternative_action}</action>"
    for d, a in zip(datums, answers, strict=True):
        d["message_log"].append({"role": "assistant", "content": a, "token_ids": torch.tensor([1])})
    batch = BatchedDataDict(
        {
            "message_log": [d["message_log"] for d in datums],
            "extra_env_info": [d["extra_env_info"] for d in datums],
            "task_name": [d["task_name"] for d in datums],
        }
    )
    out = calculate_rewards(batch, {"act_selection": env})
    sel = cfg.rewards.selection
    assert out.rewards.shape == (4, 3)
    assert out.rewards[0].tolist() == [sel.correct, 0.0, 0.0]
    assert out.rewards[2].tolist() == [0.0, 0.0, sel.malformed]
    assert out.rewards[3, 0].item() == 0.0
    assert set(ENVIRONMENTS) == {"act_selection", "act_action"}


KINDS = tuple(STAGE_KINDS)  # every kind of the table, the baselines' included


def test_every_recipe_and_stage_validates_against_the_pinned_master_config(tmp_path):
    """Base = the installed release's examples/configs; the merged config must pass its own MasterConfig."""
    from nemo_rl.algorithms import dpo, grpo, sft

    from nemo_act.config import conf_root, load_config
    from nemo_act.engines.nemo_rl import driver

    master_configs = {"grpo": grpo.MasterConfig, "sft": sft.MasterConfig, "dpo": dpo.MasterConfig}
    recipes = sorted(p for p in (conf_root() / "recipes").glob("*/*.yaml") if p.parent.name != "_layouts")
    # 36 ACT recipes, 3 preflight, 9 reflection baselines (ee/sand/agent_r x 3 benchmarks)
    assert len(recipes) == 48 and sum(p.stem.startswith("act-") for p in recipes) == 36
    for path in recipes:
        cfg = load_config(path)
        for kind in KINDS:
            m = driver.build(kind, cfg, cfg.model.name_or_path, tmp_path / kind, 5000)
            master_configs[stage_kind(kind).algorithm](**m)  # pydantic: missing keys and wrong types raise
            assert (
                m["policy"]["megatron_cfg"]["tensor_model_parallel_size"] == cfg.engine.nemo_rl.megatron.tensor_parallel
            )
            assert m["cluster"]["num_nodes"] == cfg.engine.nemo_rl.cluster.num_nodes
            validated = master_configs[stage_kind(kind).algorithm](**m).data["train"]
            assert validated == m["data"]["train"]  # pydantic keeps every data.train key we set
    act = driver.build("act", cfg, "x", tmp_path, 5000)
    assert "normalize_rewards" in act["grpo"] and "sequence_packing" in act["policy"]  # kept from the base
    bad = dict(act, grpo=dict(act["grpo"], num_prompts_per_step="many"))
    with pytest.raises(Exception, match="num_prompts_per_step"):
        grpo.MasterConfig(**bad)


def _rows_file(path, kind, rows, cfg):
    from nemo_act.engines.nemo_rl.processors import tag_rows

    tagged = tag_rows(kind, rows, cfg.model.enable_thinking)
    path.write_text("".join(json.dumps(r) + "\n" for r in tagged))
    return str(path)


def test_nemo_rls_own_loaders_build_our_datums_and_train_only_on_the_answer(
    local_ray, sw_experts, tiny_model_dir, cfg, tmp_path
):
    """Each algorithm's data through the pinned release's own loader, as its examples/run_*.py call them:
    GRPO via setup_response_data (our dataset by dotted path, our processor, our env created by name),
    SFT via load_response_dataset + AllTaskProcessedDataset (run_sft.py's setup_data), DPO via
    setup_preference_data (NeMo-RL's preference_preprocessor); then its collate functions."""
    from functools import partial

    from nemo_rl.data.collate_fn import preference_collate_fn, rl_collate_fn
    from nemo_rl.data.datasets import AllTaskProcessedDataset, load_response_dataset
    from nemo_rl.data.llm_message_utils import add_loss_mask_to_message_log, batched_message_log_to_flat_message
    from nemo_rl.data.utils import setup_preference_data, setup_response_data

    from nemo_act.data import Trajectory
    from nemo_act.engines.nemo_rl.datasets import StageRowsDataset
    from nemo_act.engines.nemo_rl.environments import register

    # setup_response_data creates the envs before it builds the dataset (whose constructor registers them): in the
    # job, tools/convert/autoregister's sitecustomize has registered them at NeMo-RL's import; here, do what it does
    # (this test failed when xdist ran it before any other test had registered them)
    register()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    pairs_file = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, pairs_file, progress=False)
    pairs = list(read_jsonl(pairs_file, Pair))[:4]
    name = "nemo_act.engines.nemo_rl.datasets.StageRowsDataset"
    grpo_rows = act_rows(pairs, cfg)
    data = {
        "max_input_seq_length": 8192, "shuffle": False,
        "train": {"dataset_name": name, "data_path": _rows_file(tmp_path / "act.jsonl", "act", grpo_rows, cfg),
                  "processor": "nemo_act", "env_name": "act_selection"},
        "validation": None, "default": None,
    }  # fmt: skip
    env_cfg = {"act_selection": {"values": cfg.rewards.selection.model_dump(), "use_admissible": True}}
    dataset, val, task_to_env, _ = setup_response_data(tok, data, env_cfg)
    assert val is None and type(task_to_env["act_selection"]).__name__.startswith("ActorHandle")
    assert "ACTSelectionEnvironment" in str(task_to_env["act_selection"])
    grpo = [dataset[i] for i in range(len(dataset))]
    for i, (datum, row) in enumerate(zip(grpo, grpo_rows, strict=True)):
        ours = grpo_datum(row, i, tok, "act_selection", 8192, cfg.model.enable_thinking)
        assert datum["message_log"][0]["token_ids"].tolist() == ours["message_log"][0]["token_ids"].tolist()
        assert datum["extra_env_info"] == ours["extra_env_info"] and datum["task_name"] == "act_selection"
    batch = rl_collate_fn(grpo)
    assert (
        batch["task_name"] == ["act_selection"] * 4 and batch["extra_env_info"][0]["candidates"] == pairs[0].candidates
    )

    il = il_rows(list(read_jsonl(sw_experts, Trajectory)), cfg)[:3]
    sft_data = load_response_dataset(
        {"dataset_name": name, "data_path": _rows_file(tmp_path / "il.jsonl", "il", il, cfg), "processor": "nemo_act"}
    )
    assert isinstance(sft_data, StageRowsDataset) and sft_data.task_name == "act_sft"
    processor = partial(sft_data.processor, add_bos=True, add_eos=True, add_generation_prompt=False)  # run_sft.py
    sft_set = AllTaskProcessedDataset(
        sft_data.dataset, tok, None, {"act_sft": (sft_data.task_spec, processor)}, max_seq_length=8192
    )
    sft = [sft_set[i] for i in range(len(sft_set))]
    logs = rl_collate_fn(sft)["message_log"]
    add_loss_mask_to_message_log(logs, roles_to_train_on=["assistant"])
    flat, _lengths = batched_message_log_to_flat_message(logs, pad_value_dict={"token_ids": tok.pad_token_id})
    answer_tokens = [len(d["message_log"][1]["token_ids"]) for d in sft]
    assert flat["token_loss_mask"].sum(dim=1).tolist() == answer_tokens  # loss on the expert action (+ eos) only

    pref_rows = dpo_rows(pairs, cfg)
    dpo_file = _rows_file(tmp_path / "dpo.jsonl", "dpo", pref_rows, cfg)
    pref_data = {"max_input_seq_length": 8192, "shuffle": False, "train": {"dataset_name": name, "data_path": dpo_file}}
    pref_set, _val = setup_preference_data(tok, pref_data)
    dpo = [pref_set[i] for i in range(len(pref_set))]
    chosen = tok.decode(torch.cat([m["token_ids"] for m in dpo[0]["message_log_chosen"]]))
    rejected = tok.decode(torch.cat([m["token_ids"] for m in dpo[0]["message_log_rejected"]]))
    assert pairs[0].expert_action in chosen.split("assistant")[-1]
    assert pairs[0].alternative_action in rejected.split("assistant")[-1]
    pref = partial(preference_collate_fn, tokenizer=tok, make_sequence_length_divisible_by=1, add_loss_mask=True)(dpo)
    assert pref["input_ids"].shape[0] == 2 * len(dpo)  # chosen and rejected interleaved


def test_a_prepared_stage_runs_through_nemo_rls_run_grpo_data_path_without_importing_us(
    sw_experts, tiny_model_dir, tmp_path
):
    """The NeMo-RL-native way (docs/cluster.md): ``driver --prepare-only`` writes the stage's rows and NeMo-RL config;
    then a fresh Python that never imports nemo_act does what the release's examples/run_grpo.py does before
    training (NeMo-RL's load_config, MasterConfig, get_tokenizer, configure_generation_config,
    setup_response_data) with only our folders on PYTHONPATH (the stage environment): our env and processor
    must be found by name through tools/convert/autoregister."""
    import os
    import subprocess
    import sys

    from nemo_act.config import load_config, to_yaml
    from nemo_act.engines.nemo_rl import driver
    from nemo_act.engines.nemo_rl.interpreters import child_env

    cfg = load_config(overrides=["engine=nemo_rl", "train.act.batch_size=4", "train.act.num_generations=2"])
    exp = tmp_path / "experiment.yaml"
    exp.write_text(to_yaml(cfg))
    pairs_file = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, pairs_file, progress=False)
    out = tmp_path / "01_act"
    args = ["--stage", "act", "--config", str(exp), "--init", str(tiny_model_dir), "--data", str(pairs_file)]
    driver.main([*args, "--out", str(out), "--prepare-only"])
    n_rows = len((out / "rows.jsonl").read_text().splitlines())
    code = f"""
import ray
from omegaconf import OmegaConf
from nemo_rl.algorithms.grpo import MasterConfig
from nemo_rl.algorithms.utils import get_tokenizer
from nemo_rl.data.utils import setup_response_data
from nemo_rl.models.generation import configure_generation_config
from nemo_rl.utils.config import load_config, register_omegaconf_resolvers
register_omegaconf_resolvers()
config = MasterConfig(**OmegaConf.to_container(load_config({str(out / "nemo_rl" / "config.yaml")!r}), resolve=True))
tokenizer = get_tokenizer(config.policy["tokenizer"])
config.policy["generation"] = configure_generation_config(config.policy["generation"], tokenizer)
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
dataset, val, task_to_env, _ = setup_response_data(tokenizer, config.data, config.env)
d = dataset[0]
print("RESULT", len(dataset), sorted(task_to_env), d["task_name"], sorted(d["extra_env_info"]))
ray.shutdown()
"""
    env = child_env({k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    line = next(x for x in res.stdout.splitlines() if x.startswith("RESULT"))
    assert line == (
        f"RESULT {n_rows} ['act_selection'] act_selection "
        "['admissible_actions', 'candidates', 'candidates_admissible', 'expert_index', 'pair_id']"
    )


def test_driver_runs_a_grpo_stage_with_the_gpu_part_standing_in(
    local_ray, sw_experts, tiny_model_dir, monkeypatch, tmp_path
):
    """The driver end to end on CPU: real config build from the release's base, real datums, real reward
    environment created through NeMo-RL's registry and scored by its ``calculate_rewards``, real NeMo-RL
    Logger (TensorBoard). Stand-ins (this machine has no GPU): NeMo-RL's ``grpo.setup`` and ``grpo_train``,
    which place Megatron and vLLM workers on GPUs; they check that the driver calls them as the pinned
    release's signatures take, then score one batch and log one step. ``init_ray`` is replaced by the test's
    isolated local cluster (the real one joins any Ray cluster already running on the machine)."""
    import inspect

    import nemo_rl.algorithms.grpo as nemo_grpo
    import nemo_rl.distributed.virtual_cluster as vc
    from nemo_rl.data.collate_fn import rl_collate_fn
    from nemo_rl.experience.rollouts import calculate_rewards
    from nemo_rl.utils.checkpoint import CheckpointManager
    from nemo_rl.utils.logger import Logger
    from torchdata.stateful_dataloader import StatefulDataLoader

    from nemo_act.config import load_config, to_yaml
    from nemo_act.engines.nemo_rl import driver

    real_setup, real_train = nemo_grpo.setup, nemo_grpo.grpo_train
    seen = {}

    def setup(master_config, tokenizer, dataset, val_dataset, *rest):
        inspect.signature(real_setup).bind(master_config, tokenizer, dataset, val_dataset, *rest)
        seen["config"] = master_config
        loader = StatefulDataLoader(
            dataset, batch_size=master_config.grpo["num_prompts_per_step"], collate_fn=rl_collate_fn
        )
        logger = Logger(dict(master_config.logger, monitor_gpus=False))
        checkpointer = CheckpointManager(master_config.checkpointing)
        return (None, None, None, None, loader, None, None, logger, checkpointer, None, master_config, {}, {})

    def grpo_train(*args):
        inspect.signature(real_train).bind(*args)
        loader, task_to_env, logger, checkpointer = args[2], args[6], args[8], args[9]
        batch = next(iter(loader))
        for log, info in zip(batch["message_log"], batch["extra_env_info"], strict=True):
            expert = info["candidates"][info["expert_index"]]
            log.append({"role": "assistant", "content": f"<action>{expert}</action>", "token_ids": torch.tensor([1])})
        rewards = calculate_rewards(batch, task_to_env).rewards
        logger.log_metrics({"loss": 0.5, "reward": rewards.sum(dim=1).mean().item()}, step=1, prefix="train")
        seen["rewards"] = rewards
        saved = checkpointer.init_tmp_checkpoint(1, {"step": 1, "total_steps": 1})  # the last step's save
        checkpointer.finalize_checkpoint(saved)

    monkeypatch.setattr(nemo_grpo, "setup", setup)
    monkeypatch.setattr(nemo_grpo, "grpo_train", grpo_train)
    monkeypatch.setattr(vc, "init_ray", lambda *a, **k: None)  # the module-scoped isolated cluster is up
    cfg = load_config(
        overrides=[
            "engine=nemo_rl",
            "train.act.batch_size=4",
            "train.act.num_generations=2",
            "train.act.grad_accum=1",
            "train.act.max_steps=1",
        ]
    )
    exp = tmp_path / "experiment.yaml"
    exp.write_text(to_yaml(cfg))
    pairs_file = tmp_path / "pairs.jsonl"
    collect_pairs(sw_experts, RandomGenerator(), cfg, pairs_file, progress=False)
    out = tmp_path / "01_act"
    driver.main(
        [
            "--stage",
            "act",
            "--config",
            str(exp),
            "--init",
            str(tiny_model_dir),
            "--data",
            str(pairs_file),
            "--out",
            str(out),
        ]
    )
    assert seen["config"].grpo["num_prompts_per_step"] == 2 and seen["config"].grpo["num_generations_per_prompt"] == 2
    assert seen["rewards"].shape == (2, 3) and seen["rewards"][:, 0].tolist() == [cfg.rewards.selection.correct] * 2
    assert "num_generations_per_prompt: 2" in (out / "nemo_rl" / "config.yaml").read_text()
    (line,) = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert line["step"] == 1 and line["loss"] == 0.5 and line["train/loss"] == 0.5
    assert line["rewards/selection_accuracy/mean"] == 1.0 and line["rewards/named_neither/mean"] == 0.0


EXTENSION = '''
from nemo_act.rewards import RewardParts, parse_action
from nemo_act.stage_kinds import RewardKind, StageKind, register


def score_east(response, row, values, use_admissible):
    """The expert's action earns correct; any other 'go ...' the admissible value."""
    parsed = parse_action(response)
    if not parsed.well_formed or parsed.action is None:
        return RewardParts(0.0, 0.0, values.malformed, parsed.action, parsed.status)
    if parsed.action == row["expert_action"]:
        return RewardParts(values.correct, 0.0, 0.0, parsed.action, parsed.status)
    return RewardParts(0.0, values.admissible if parsed.action.startswith("go ") else 0.0, 0.0, parsed.action,
                       parsed.status)


register(RewardKind(name="east", score="twin_reward_ext:score_east", values="rewards.action"))
register(StageKind(name="rl_east", algorithm="grpo", data="experts", rows="nemo_act.kinds.imitation:rl_rows",
                   prompt="generation", reward="east", train="rl"))
'''

DRIVER = """
import json, sys
import ray
import torch
from nemo_rl.distributed.batched_data_dict import BatchedDataDict
from nemo_rl.environments.utils import create_env
from nemo_rl.experience.rollouts import calculate_rewards
from nemo_act.config import load_config
from nemo_act.engines.nemo_rl import recipe
from nemo_act.engines.nemo_rl.environments import register

cfg = load_config(overrides=["extensions=[twin_reward_ext]", "pipeline.stages=[rl_east]", "engine=nemo_rl",
                             "generation=vllm", "train=cluster"])
m = recipe.master_config("rl_east", cfg, {}, init="/ckpt", out=sys.argv[1], n_rows=1000)
name = m["data"]["train"]["env_name"]
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
register()  # in the driver, after the config (and so the extension) is loaded: as the driver does
env = create_env(name, m["env"][name])
answers = ["<action>go east</action>", "<action>go west</action>", "<action>look</action>", "oops"]
row = {"expert_action": "go east", "admissible_actions": ["go east", "go west", "look"]}
batch = BatchedDataDict({
    "message_log": [[{"role": "assistant", "content": a, "token_ids": torch.tensor([1])}] for a in answers],
    "extra_env_info": [row] * 4, "task_name": [name] * 4,
})
out = calculate_rewards(batch, {name: env})
print(json.dumps({"name": name, "actor": str(env), "rewards": out.rewards.tolist()}))
ray.shutdown()
"""


def test_a_reward_registered_by_an_extension_runs_as_nemo_rl_s_environment(tmp_path):
    """A reward of the user's (an ``extensions`` module outside nemo-act) through NeMo-RL's own create_env and
    rollout scoring: the recipe names its environment, our driver-side register() puts it in NeMo-RL's registry
    on the generic actor, and the actor (a fresh Ray worker process) imports the extension itself. Run in a child
    process so the Ray workers inherit the extension's folder on PYTHONPATH, as the Slurm job's do."""
    import os
    import subprocess
    import sys

    (tmp_path / "twin_reward_ext.py").write_text(EXTENSION)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "stage")], env=env, capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.splitlines()[-1])
    assert got["name"] == "reward_east" and "ACTRewardEnvironment" in got["actor"]
    expected = [[1.0, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, -0.5]]  # expert, go west, look, malformed
    assert got["rewards"] == [pytest.approx(r) for r in expected]
