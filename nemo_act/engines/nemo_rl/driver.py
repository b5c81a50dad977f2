r"""Cluster-engine driver: one stage (ACT, RL, IL, SFT-on-choice, DPO) on NeMo-RL's GRPO / SFT / DPO.

    python -m nemo_act.engines.nemo_rl.driver --stage act --init Qwen/Qwen3-8B \
        --config conf/recipes/alfworld/act-qwen3-8b-4n4g-megatron.yaml \
        --data runs/x/data/pairs.jsonl --out runs/x/stages/01_act [dotted.key=value ...]

``--data`` is a pairs file (ACT and the same-pair controls) or an experts file (IL, RL); the
pipeline runner passes ready rows with ``--rows`` instead. The NeMo-RL config is the pinned
release's example config for the algorithm with our settings over it (:mod:`.recipe`); it is
written to ``<out>/nemo_rl/config.yaml`` before training. Training resumes from the newest
checkpoint in ``<out>/checkpoints`` (NeMo-RL's own resume). Afterwards ``<out>/metrics.jsonl``
holds one line per step (NeMo-RL's TensorBoard scalars + the reward parts).

This is the only module (with :mod:`.environments`) that imports NeMo-RL: it needs the release
container or a checkout of the pinned tag (``conf/engine/_nemo_rl_pin.yaml``), and a GPU cluster
brought up by ``slurm/*.sub``. Everything it calls from our side is engine-free and tested in CI.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from nemo_act.config.load import load_config
from nemo_act.data.io import write_text_atomic
from nemo_act.engines.local.stages import stage_experiment
from nemo_act.engines.nemo_rl import recipe
from nemo_act.engines.nemo_rl.launch import checkpoint_step, latest_checkpoint, stage_metrics
from nemo_act.engines.nemo_rl.processors import stage_datums
from nemo_act.engines.nemo_rl.reward_env import resume_reward_log


def nemo_rl_root() -> Path:
    """The NeMo-RL checkout (``$NEMO_RL_DIR``, else the folder above the imported ``nemo_rl``)."""
    import nemo_rl

    root = Path(os.environ.get("NEMO_RL_DIR") or Path(nemo_rl.__file__).resolve().parents[1])
    if not (root / "examples" / "configs").is_dir():
        raise FileNotFoundError(
            f"{root}/examples/configs not found: set NEMO_RL_DIR to the NeMo-RL checkout of the pinned release "
            "(in its container: /opt/nemo-rl)"
        )
    return root


def base_config(algorithm: str, cfg) -> dict[str, Any]:
    """The release's example config for an algorithm, inheritance applied, interpolations kept."""
    from nemo_rl.utils.config import load_config as nemo_rl_load_config

    path = nemo_rl_root() / "examples" / "configs" / recipe.settings(cfg).bases[algorithm]
    return OmegaConf.to_container(nemo_rl_load_config(str(path)), resolve=False)  # type: ignore[return-value]


def resolve(master: dict[str, Any]) -> dict[str, Any]:
    """Resolve ``${...}`` interpolations (NeMo-RL's resolvers, e.g. ``${mul:...}``) after the merge."""
    from nemo_rl.utils.config import register_omegaconf_resolvers

    register_omegaconf_resolvers()
    return OmegaConf.to_container(OmegaConf.create(master), resolve=True)  # type: ignore[return-value]


def build(kind: str, cfg, init: str, out: Path, n_rows: int) -> dict[str, Any]:
    """The resolved NeMo-RL config of a stage."""
    algorithm = recipe.ALGORITHM[kind]
    return resolve(recipe.master_config(kind, cfg, base_config(algorithm, cfg), init=init, out=out, n_rows=n_rows))


def _tensorboard_scalars(log_dir: Path) -> dict[int, dict[str, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[int, dict[str, float]] = {}
    for events in sorted({p.parent for p in log_dir.rglob("events.out.tfevents.*")}):
        acc = EventAccumulator(str(events))
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            for ev in acc.Scalars(tag):
                out.setdefault(int(ev.step), {})[tag] = float(ev.value)
    return out


def _rows(args: argparse.Namespace, cfg) -> list[dict[str, Any]]:
    if args.rows:
        return [json.loads(line) for line in Path(args.rows).read_text().splitlines() if line.strip()]
    from nemo_act.stage_data import rows_for

    return rows_for(args.stage, args.data, cfg)


def run(args: argparse.Namespace) -> Path:
    """Train one stage with NeMo-RL; return the stage folder."""
    from nemo_rl.algorithms.utils import get_tokenizer
    from nemo_rl.distributed.virtual_cluster import init_ray

    out = Path(args.out)
    cfg = stage_experiment(args.stage, load_config(args.config, args.overrides))
    rows = _rows(args, cfg)
    master = build(args.stage, cfg, args.init, out, len(rows))
    resumed_at = checkpoint_step(latest_checkpoint(out / "checkpoints"))
    for env_cfg in master.get("env", {}).values():
        if isinstance(env_cfg, dict) and "log_path" in env_cfg:  # our reward environments
            env_cfg["first_step"] = resumed_at
            resume_reward_log(env_cfg["log_path"], resumed_at)
    write_text_atomic(out / "nemo_rl" / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(master)))
    tokenizer = get_tokenizer(master["policy"]["tokenizer"])
    task = recipe.TASK_NAME.get(args.stage)
    datums = stage_datums(
        args.stage, rows, tokenizer, task, master["policy"]["max_total_sequence_length"], cfg.model.enable_thinking
    )
    init_ray()
    algorithm = recipe.ALGORITHM[args.stage]
    if algorithm == "grpo":
        _grpo(master, tokenizer, datums, task)
    elif algorithm == "sft":
        _sft(master, tokenizer, datums)
    else:
        _dpo(master, tokenizer, datums)
    metrics = stage_metrics(
        _tensorboard_scalars(Path(master["logger"]["log_dir"])), out / recipe.REWARD_LOG, args.stage
    )
    write_text_atomic(out / "metrics.jsonl", "".join(json.dumps(m) + "\n" for m in metrics))
    return out


def _grpo(master: dict[str, Any], tokenizer, datums: list[dict[str, Any]], task: str) -> None:
    from nemo_rl.algorithms.grpo import MasterConfig, grpo_train, setup
    from nemo_rl.environments.utils import create_env
    from nemo_rl.models.generation import configure_generation_config

    from nemo_act.engines.nemo_rl.environments import register

    register()
    config = MasterConfig(**master)
    config.policy["generation"] = configure_generation_config(config.policy["generation"], tokenizer)
    task_to_env = {task: create_env(task, master["env"][task])}
    (policy, generation, _gym, _cluster, loader, val_loader, loss_fn, logger, ckpt, state, config, *_rest) = setup(
        config, tokenizer, datums, None
    )
    grpo_train(policy, generation, loader, val_loader, tokenizer, loss_fn, task_to_env, {}, logger, ckpt, state, config)


def _sft(master: dict[str, Any], tokenizer, datums: list[dict[str, Any]]) -> None:
    from nemo_rl.algorithms.sft import MasterConfig, setup, sft_train

    (policy, _cluster, loader, val_loader, loss_fn, logger, ckpt, state, config) = setup(
        MasterConfig(**master), tokenizer, datums, None
    )
    sft_train(policy, loader, val_loader, tokenizer, loss_fn, config, logger, ckpt, state)


def _dpo(master: dict[str, Any], tokenizer, datums: list[dict[str, Any]]) -> None:
    from nemo_rl.algorithms.dpo import MasterConfig, dpo_train, setup

    (policy, _cluster, loader, val_loaders, loss_fn, logger, ckpt, state, config) = setup(
        MasterConfig(**master), tokenizer, datums, {}
    )
    dpo_train(policy, loader, val_loaders, tokenizer, loss_fn, config, logger, ckpt, state)


def parser() -> argparse.ArgumentParser:
    """Command-line arguments of the driver."""
    p = argparse.ArgumentParser(prog="python -m nemo_act.engines.nemo_rl.driver", description=__doc__.splitlines()[0])
    p.add_argument("--stage", required=True, choices=sorted(recipe.ALGORITHM))
    p.add_argument("--config", required=True, help="experiment config or cluster recipe (conf/recipes/...)")
    p.add_argument("--init", required=True, help="HF checkpoint the stage starts from")
    data = p.add_mutually_exclusive_group(required=True)
    data.add_argument("--data", help="pairs JSONL (act, act_noreason, sft_choice, dpo) or experts JSONL (il, rl)")
    data.add_argument("--rows", help="ready stage rows, one JSON object per line (what the runner passes)")
    p.add_argument("--out", required=True, help="stage folder")
    p.add_argument("overrides", nargs="*", help="dotted.key=value or group=option overrides of --config")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    run(parser().parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
