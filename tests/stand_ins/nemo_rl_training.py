"""Our cluster driver in its own process with only NeMo-RL's GPU-bound setup and training loop stood in.

    python tests/stand_ins/nemo_rl_training.py RECORD.json <nemo_act.engines.nemo_rl.driver arguments>

Run by ``tests/test_cluster_twin.py`` in the CPU twin of NeMo-RL's image, with the job's environment
(``launch.stage_env``). Everything of ours is real: the driver module runs as ``__main__`` (argument
parsing, the config built over the release's own ``examples/configs``, the rows file, the save deadline),
and so is everything of NeMo-RL's that runs on a CPU: ``get_tokenizer``, ``init_ray`` (attaching to the
job's Ray head), the data setup (``setup_response_data`` with the reward env actors it creates through
``create_env``, ``load_response_dataset``, ``setup_preference_data``), ``StatefulDataLoader`` with its
collate functions, ``Logger`` (TensorBoard), ``CheckpointManager`` and ``calculate_rewards``.

Stood in, because they need GPUs: ``grpo.setup`` / ``sft.setup`` / ``dpo.setup`` (they place Megatron
workers and vLLM engines on GPUs) and ``grpo_train`` / ``sft_train`` / ``dpo_train``. They follow NeMo-RL
v0.7.0's signatures and return tuples (``algorithms/grpo.py:254`` -> the 13-tuple of ``grpo.py:1235-1249``;
``sft.py:92`` -> the 9-tuple of ``sft.py:239-249``; ``dpo.py`` -> the 9-tuple of ``dpo.py:295-305``) and
build what those build on a CPU the way they do (``Logger(config.logger)``, ``CheckpointManager(config
.checkpointing)``, the train loader as ``grpo.py:358-364``). A stood-in step takes the next batch of the
real loader; for GRPO it answers each prompt ``num_generations_per_prompt`` times (alternately the right
answer in the answer format and a malformed one) and scores them with the real reward actors through
``calculate_rewards``; it logs ``train/loss`` (and ``train/reward``) as NeMo-RL's loop does and saves a
checkpoint every ``save_period`` steps (``policy/weights`` left empty: no model was built). At most
``STANDIN_STEPS`` (2) steps. RECORD.json gets what the loop was handed (the checkpointing section, steps,
rewards).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

STEPS = int(os.environ.get("STANDIN_STEPS", "2"))


def _loader(dataset: Any, batch_size: int, collate_fn: Any) -> Any:
    from torchdata.stateful_dataloader import StatefulDataLoader

    return StatefulDataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=collate_fn, drop_last=True)


def _save(checkpointer: Any, step: int) -> None:
    path = Path(checkpointer.init_tmp_checkpoint(step, {"step": step, "total_steps": step}))
    (path / "policy" / "weights").mkdir(parents=True, exist_ok=True)
    checkpointer.finalize_checkpoint(path)


def _answer(meta: dict[str, Any], i: int) -> str:
    """The i-th response of a GRPO group: the right answer in the answer format, or (odd i) a malformed one."""
    right = meta["candidates"][meta["expert_index"]] if "candidates" in meta else meta["expert_action"]
    return f"<action>{right}</action>" if i % 2 == 0 else "no answer"


def _grpo_setup(master_config: Any, tokenizer: Any, dataset: Any, val_dataset: Any) -> tuple:
    from nemo_rl.data.collate_fn import rl_collate_fn

    loader = _loader(dataset, master_config.grpo["num_prompts_per_step"], rl_collate_fn)
    logger, ckpt = _logger_and_checkpointer(master_config)
    return (None, None, None, (None, None), loader, None, None, logger, ckpt, {}, master_config, None, None)


def _grpo_train(policy, generation, loader, val_loader, tokenizer, loss_fn, task_to_env, val_task_to_env, logger,
                checkpointer, state, master_config) -> None:  # fmt: skip
    import torch
    from nemo_rl.experience.rollouts import calculate_rewards

    rewards = []
    for step, batch in enumerate(loader, start=1):
        if step > min(STEPS, master_config.grpo["max_num_steps"]):
            break
        batch = batch.repeat_interleave(master_config.grpo["num_generations_per_prompt"])
        for i, (log, meta) in enumerate(zip(batch["message_log"], batch["extra_env_info"], strict=True)):
            log.append({"role": "assistant", "content": _answer(meta, i), "token_ids": torch.tensor([0])})
        env_out = calculate_rewards(batch, task_to_env)
        rewards.append(env_out.rewards.tolist())
        logger.log_metrics({"loss": 1.0 / step, "reward": float(env_out.rewards.sum(dim=-1).mean())}, step, "train")
        if step % master_config.checkpointing["save_period"] == 0:
            _save(checkpointer, step)
    _record(master_config, len(rewards), rewards)


def _logger_and_checkpointer(master_config: Any) -> tuple:
    from nemo_rl.utils.checkpoint import CheckpointManager
    from nemo_rl.utils.logger import Logger

    return Logger(master_config.logger), CheckpointManager(master_config.checkpointing)


def _sft_setup(master_config: Any, tokenizer: Any, train_dataset: Any, val_dataset: Any) -> tuple:
    from nemo_rl.data.collate_fn import rl_collate_fn

    loader = _loader(train_dataset, master_config.policy["train_global_batch_size"], rl_collate_fn)
    logger, ckpt = _logger_and_checkpointer(master_config)
    return (None, None, loader, None, None, logger, ckpt, {}, master_config)


def _dpo_setup(master_config: Any, tokenizer: Any, train_dataset: Any, val_dataset: Any) -> tuple:
    from functools import partial

    from nemo_rl.data.collate_fn import preference_collate_fn

    divisible = master_config.policy["make_sequence_length_divisible_by"]
    collate = partial(preference_collate_fn, tokenizer=tokenizer, make_sequence_length_divisible_by=divisible,
                      add_loss_mask=True)  # fmt: skip
    loader = _loader(train_dataset, master_config.policy["train_global_batch_size"] // 2, collate)
    logger, ckpt = _logger_and_checkpointer(master_config)
    return (None, None, loader, None, None, logger, ckpt, {}, master_config)


def _sft_train(policy, loader, val_loader, tokenizer, loss_fn, master_config, logger, checkpointer, state) -> None:
    steps = 0
    for step, _batch in enumerate(loader, start=1):
        if step > STEPS:
            break
        logger.log_metrics({"loss": 1.0 / step}, step, "train")
        if step % master_config.checkpointing["save_period"] == 0:
            _save(checkpointer, step)
        steps = step
    _record(master_config, steps, [])


def _record(master_config: Any, steps: int, rewards: list) -> None:
    Path(_RECORD).write_text(
        json.dumps({"checkpointing": dict(master_config.checkpointing), "steps": steps, "rewards": rewards})
    )


_RECORD = ""


def main() -> None:
    """Patch NeMo-RL's setup/train functions, then run the driver module as ``__main__``."""
    global _RECORD
    from nemo_rl.algorithms import dpo, grpo, sft

    grpo.setup, grpo.grpo_train = _grpo_setup, _grpo_train
    sft.setup, sft.sft_train = _sft_setup, _sft_train
    dpo.setup, dpo.dpo_train = _dpo_setup, _sft_train
    _RECORD = sys.argv.pop(1)
    runpy.run_module("nemo_act.engines.nemo_rl.driver", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
