"""Cluster engine against NeMo-RL itself: our reward environments registered in NeMo-RL's registries,
created by its ``create_env`` and scored by its rollout's ``calculate_rewards``, under a real local Ray.

NeMo-RL is not on PyPI (release container or a checkout of the tag pinned in
``conf/engine/_nemo_rl_pin.yaml``), so CI skips this file; see README "Cluster engine" for how it
was run here (v0.7.0 source, no-deps, Python 3.13 venv, CPU).
"""

import pytest

nemo_rl = pytest.importorskip(
    "nemo_rl", reason="NeMo-RL is not installed (its container or a checkout of the pinned tag; not on PyPI)"
)

import ray  # noqa: E402
import torch  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from nemo_act import stage_data  # noqa: E402
from nemo_act.data import Pair, read_jsonl  # noqa: E402
from nemo_act.engines.nemo_rl.processors import grpo_datum  # noqa: E402
from nemo_act.generation import RandomGenerator  # noqa: E402
from nemo_act.pairs import collect_pairs  # noqa: E402


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
    rows = stage_data.act_rows(pairs, cfg)
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
