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
``calculate_rewards``; it logs ``train/loss`` (and ``train/reward``) as NeMo-RL's loop does. The loop's frame is
NeMo-RL's: it resumes from the newest checkpoint's ``training_info.json`` (``grpo.py:320-322``, ``sft.py:137-138``),
and with NeMo-RL's own ``TimeoutChecker`` on ``checkpoint_must_save_by`` (``grpo.py:2147-2151``, ``sft.py:387-391``)
it saves at the last step, every ``save_period`` steps or at the deadline (``grpo.py:2871-2890``, ``sft.py:522-535``;
``policy/weights`` left empty: no model was built) and returns after a deadline save ("Timeout has been reached,
stopping training early": ``grpo.py:3123-3126``, ``sft.py:646-648``). At most ``STANDIN_STEPS`` (2) steps in all.
RECORD.json gets what the loop was handed (the checkpointing section, the steps it ran, rewards).
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


def _resumed(checkpointer: Any) -> dict[str, Any]:
    """The training info of the newest checkpoint, as grpo.py:320-322 and sft.py:137-138 read it, or a fresh state."""
    return checkpointer.load_training_info(checkpointer.get_latest_checkpoint_path()) or {"total_steps": 0}


def _grpo_setup(master_config: Any, tokenizer: Any, dataset: Any, val_dataset: Any) -> tuple:
    from nemo_rl.data.collate_fn import rl_collate_fn

    loader = _loader(dataset, master_config.grpo["num_prompts_per_step"], rl_collate_fn)
    logger, ckpt = _logger_and_checkpointer(master_config)
    return (None, None, None, (None, None), loader, None, None, logger, ckpt, _resumed(ckpt), master_config, None,
            None)  # fmt: skip


def _loop(master_config: Any, algorithm: str, loader: Any, checkpointer: Any, state: dict, step_fn: Any) -> int:
    """NeMo-RL's loop frame around ``step_fn(step, batch)``: resume, save rule, deadline; returns the steps run."""
    from nemo_rl.utils.timer import TimeoutChecker

    timeout = TimeoutChecker(timeout=master_config.checkpointing["checkpoint_must_save_by"], fit_last_save_time=True)
    timeout.start_iterations()
    total, ran = int(state["total_steps"]), 0
    section = getattr(master_config, algorithm)  # GRPO's a dict, SFT's and DPO's a config object (sft.py:650)
    last = section["max_num_steps"] if isinstance(section, dict) else section.max_num_steps
    for batch in loader:
        if total >= min(STEPS, last):
            break
        step_fn(total + 1, batch)
        timeout.mark_iteration()
        by_step = total + 1 >= last or (total + 1) % master_config.checkpointing["save_period"] == 0
        by_timeout = timeout.check_save()
        if by_step or by_timeout:
            _save(checkpointer, total + 1)
        total, ran = total + 1, ran + 1
        if by_timeout:
            print("Timeout has been reached, stopping training early", flush=True)
            break
    return ran


def _grpo_train(policy, generation, loader, val_loader, tokenizer, loss_fn, task_to_env, val_task_to_env, logger,
                checkpointer, state, master_config) -> None:  # fmt: skip
    import torch
    from nemo_rl.experience.rollouts import calculate_rewards

    rewards = []

    def step_fn(step: int, batch: Any) -> None:
        batch = batch.repeat_interleave(master_config.grpo["num_generations_per_prompt"])
        for i, (log, meta) in enumerate(zip(batch["message_log"], batch["extra_env_info"], strict=True)):
            log.append({"role": "assistant", "content": _answer(meta, i), "token_ids": torch.tensor([0])})
        env_out = calculate_rewards(batch, task_to_env)
        rewards.append(env_out.rewards.tolist())
        logger.log_metrics({"loss": 1.0 / step, "reward": float(env_out.rewards.sum(dim=-1).mean())}, step, "train")

    _record(master_config, _loop(master_config, "grpo", loader, checkpointer, state, step_fn), rewards)


def _logger_and_checkpointer(master_config: Any) -> tuple:
    from nemo_rl.utils.checkpoint import CheckpointManager
    from nemo_rl.utils.logger import Logger

    return Logger(master_config.logger), CheckpointManager(master_config.checkpointing)


def _sft_setup(master_config: Any, tokenizer: Any, train_dataset: Any, val_dataset: Any) -> tuple:
    from nemo_rl.data.collate_fn import rl_collate_fn

    loader = _loader(train_dataset, master_config.policy["train_global_batch_size"], rl_collate_fn)
    logger, ckpt = _logger_and_checkpointer(master_config)
    return (None, None, loader, None, None, logger, ckpt, _resumed(ckpt), master_config)


def _dpo_setup(master_config: Any, tokenizer: Any, train_dataset: Any, val_dataset: Any) -> tuple:
    from functools import partial

    from nemo_rl.data.collate_fn import preference_collate_fn

    divisible = master_config.policy["make_sequence_length_divisible_by"]
    collate = partial(preference_collate_fn, tokenizer=tokenizer, make_sequence_length_divisible_by=divisible,
                      add_loss_mask=True)  # fmt: skip
    loader = _loader(train_dataset, master_config.policy["train_global_batch_size"] // 2, collate)
    logger, ckpt = _logger_and_checkpointer(master_config)
    return (None, None, loader, None, None, logger, ckpt, _resumed(ckpt), master_config)


def _sft_train(policy, loader, val_loader, tokenizer, loss_fn, master_config, logger, checkpointer, state,
               algorithm: str = "sft") -> None:  # fmt: skip
    def step_fn(step: int, batch: Any) -> None:
        logger.log_metrics({"loss": 1.0 / step}, step, "train")

    _record(master_config, _loop(master_config, algorithm, loader, checkpointer, state, step_fn), [])


def _dpo_train(policy, loader, val_loaders, tokenizer, loss_fn, master_config, logger, checkpointer, state) -> None:
    _sft_train(policy, loader, val_loaders, tokenizer, loss_fn, master_config, logger, checkpointer, state, "dpo")


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
    dpo.setup, dpo.dpo_train = _dpo_setup, _dpo_train
    _RECORD = sys.argv.pop(1)
    runpy.run_module("nemo_act.engines.nemo_rl.driver", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
