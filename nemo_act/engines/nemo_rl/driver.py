r"""Cluster-engine driver: one stage of any kind on NeMo-RL's GRPO / SFT / DPO (its kind's ``algorithm``).

    python -m nemo_act.engines.nemo_rl.driver --stage act --init Qwen/Qwen3-8B \
        --config conf/recipes/alfworld/act-qwen3-8b-4n4g-megatron.yaml \
        --data runs/x/data/pairs.jsonl --out runs/x/stages/01_act [dotted.key=value ...]

``--data`` is a pairs file (ACT and the same-pair controls) or an experts file (IL, RL); the
pipeline runner passes ready rows with ``--rows`` instead. The NeMo-RL config is the pinned
release's example config for the algorithm with our settings over it (:mod:`.recipe`); it is
written to ``<out>/nemo_rl/config.yaml`` before training, with ``data.train`` naming our dataset
class (:mod:`.datasets`) over ``<out>/rows.jsonl``. Data are loaded the way NeMo-RL's own
``examples/run_grpo.py`` / ``run_sft.py`` / ``run_dpo.py`` load them, so ``--prepare-only`` and then
those scripts on that config train the same stage (docs/cluster.md). Training resumes from the
newest checkpoint in ``<out>/checkpoints`` (NeMo-RL's own resume). Afterwards ``<out>/metrics.jsonl``
holds one line per step (NeMo-RL's TensorBoard scalars + the reward parts).

This module, :mod:`.environments` and :mod:`.datasets` import NeMo-RL: they need the release
container or a checkout of the pinned tag (``conf/engine/_nemo_rl_pin.yaml``), and a GPU cluster
brought up by ``slurm/*.sub`` for training. Everything they call from our side is engine-free and
tested in CI.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from nemo_act.config.load import load_config
from nemo_act.data.io import write_text_atomic
from nemo_act.engines.nemo_rl import recipe  # noqa: TID253
from nemo_act.engines.nemo_rl.launch import (  # noqa: TID253
    STOPPED_EXIT,
    checkpoint_step,
    latest_checkpoint,
    stage_metrics,
    stopped_short,
)
from nemo_act.engines.nemo_rl.processors import tag_rows  # noqa: TID253
from nemo_act.engines.nemo_rl.reward_env import resume_reward_log  # noqa: TID253
from nemo_act.engines.nemo_rl.settings import nemo_rl_settings
from nemo_act.stage_data import rows_for, stage_experiment
from nemo_act.stage_kinds import STAGE_KINDS, stage_kind


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
    """The release's example config for an algorithm, inheritance applied, interpolations kept (a fresh copy)."""
    path = nemo_rl_root() / "examples" / "configs" / nemo_rl_settings(cfg).bases[algorithm]
    return copy.deepcopy(_load_base(str(path)))


@functools.lru_cache(maxsize=16)
def _load_base(path: str) -> dict[str, Any]:
    """A base file parsed once per process.

    NeMo-RL's inheritance merge costs ~1 s a file; a plan or a recipe check builds dozens of stage configs from
    the same three bases.
    """
    from nemo_rl.utils.config import load_config as nemo_rl_load_config

    return OmegaConf.to_container(nemo_rl_load_config(path), resolve=False)  # type: ignore[return-value]


def resolve(master: dict[str, Any]) -> dict[str, Any]:
    """Resolve ``${...}`` interpolations (NeMo-RL's resolvers, e.g. ``${mul:...}``) after the merge."""
    from nemo_rl.utils.config import register_omegaconf_resolvers

    register_omegaconf_resolvers()
    return OmegaConf.to_container(OmegaConf.create(master), resolve=True)  # type: ignore[return-value]


def build(kind: str, cfg, init: str, out: Path, n_rows: int) -> dict[str, Any]:
    """The resolved NeMo-RL config of a stage."""
    algorithm = stage_kind(kind).algorithm
    return resolve(recipe.master_config(kind, cfg, base_config(algorithm, cfg), init=init, out=out, n_rows=n_rows))


# NeMo-RL's GPU/Ray monitor (logger.monitor_gpus) logs under this prefix on its own sample counter
# ("ray/ray_step", every collection interval: nemo_rl/utils/logger.py:990-1007), not on training steps: its
# rows stay in TensorBoard and out of the stage's per-step metrics.jsonl.
MONITOR_PREFIX = "ray/"


def _tensorboard_scalars(log_dir: Path) -> dict[int, dict[str, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[int, dict[str, float]] = {}
    for events in sorted({p.parent for p in log_dir.rglob("events.out.tfevents.*")}):
        acc = EventAccumulator(str(events))
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            if tag.startswith(MONITOR_PREFIX):
                continue
            for ev in acc.Scalars(tag):
                out.setdefault(int(ev.step), {})[tag] = float(ev.value)
    return out


def _rows(args: argparse.Namespace, cfg) -> list[dict[str, Any]]:
    if args.rows:
        return [json.loads(line) for line in Path(args.rows).read_text().splitlines() if line.strip()]

    return rows_for(args.stage, args.data, cfg)


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Write what a NeMo-RL run of the stage reads, and return its config (resolved, unvalidated).

    ``<out>/rows.jsonl``: the stage's rows tagged for :class:`.datasets.StageRowsDataset`;
    ``<out>/nemo_rl/config.yaml``: the whole NeMo-RL config, whose ``data.train`` names that class and
    file, so ``examples/run_grpo.py`` (``run_sft.py``, ``run_dpo.py``) of the pinned release runs it as it
    is. A resumed stage (a ``step_<N>`` checkpoint in ``<out>/checkpoints``) numbers its reward-part lines
    on from ``N``.
    """
    out = Path(args.out)
    cfg = stage_experiment(args.stage, load_config(args.config, args.overrides))
    given = _rows(args, cfg)
    rows = tag_rows(args.stage, given, cfg.model.enable_thinking)
    same_file = args.rows is not None and Path(args.rows).resolve() == (out / recipe.ROWS).resolve()
    if rows != given or not same_file:  # the runner hands over its rows already tagged, in that very file
        write_text_atomic(out / recipe.ROWS, "".join(json.dumps(r) + "\n" for r in rows))
    master = build(args.stage, cfg, args.init, out, len(rows))
    resumed_at = checkpoint_step(latest_checkpoint(out / "checkpoints"))
    for env_cfg in master.get("env", {}).values():
        if isinstance(env_cfg, dict) and "log_path" in env_cfg:  # our reward environments
            env_cfg["first_step"] = resumed_at
            resume_reward_log(env_cfg["log_path"], resumed_at)
    write_text_atomic(out / "nemo_rl" / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(master)))
    return master


def trained_to_the_end(master: dict[str, Any], algorithm: str, checkpoints: Path) -> int | None:
    """The step of the newest checkpoint when it is the stage's last (``max_num_steps``), else None.

    A stage killed after its final checkpoint and before the export is then handed over from that checkpoint
    without starting NeMo-RL at all, whatever its loop would do on a resume at the end (the local engine's
    equivalent: :mod:`nemo_act.engines.local.exact_resume`). Our recipes always set ``max_num_steps``
    (:func:`.recipe._loop`).

    Raises:
        RuntimeError: The newest checkpoint is past ``max_num_steps``: the stage trained past its last step
            (the driver calls this again after NeMo-RL returns, so a resume that did so is never exported) or
            the folder holds another stage's checkpoints.
    """
    step = checkpoint_step(latest_checkpoint(checkpoints))
    steps = master[algorithm]["max_num_steps"]
    if step and steps and step > steps:
        raise RuntimeError(
            f"{checkpoints}/step_{step} is past the stage's last step ({algorithm}.max_num_steps {steps}): it trained "
            f"past it or the folder holds another stage's checkpoints; delete {checkpoints.parent} to train it again"
        )
    return step if step and steps and step == steps else None


class StoppedAtDeadline(Exception):
    """NeMo-RL's loop returned after the job's deadline save, short of the stage's last step (the driver exits 75)."""


def run(args: argparse.Namespace) -> Path:
    """Train one stage with NeMo-RL (or, with ``--prepare-only``, only write its inputs); return the folder.

    Raises:
        StoppedAtDeadline: The loop returned with its newest checkpoint short of ``max_num_steps`` (the job's save
            deadline): no metrics are handed over and the launcher exports nothing; the next run resumes.
    """
    out = Path(args.out)
    master = prepare(args)
    if args.prepare_only:
        print(f"NeMo-RL config: {out / 'nemo_rl' / 'config.yaml'}; rows: {out / recipe.ROWS}")
        return out
    algorithm = stage_kind(args.stage).algorithm
    if (last := trained_to_the_end(master, algorithm, out / "checkpoints")) is not None:
        print(f"{out.name}: checkpoint step_{last} is the stage's last step: nothing left to train (resumed after it)")
    else:
        from nemo_rl.algorithms.utils import get_tokenizer
        from nemo_rl.distributed.virtual_cluster import init_ray

        from nemo_act.engines.nemo_rl.environments import register

        register()
        tokenizer = get_tokenizer(master["policy"]["tokenizer"])
        init_ray()
        margin = nemo_rl_settings(load_config(args.config, args.overrides)).save_deadline_margin_s
        {"grpo": _grpo, "sft": _sft, "dpo": _dpo}[algorithm](master, tokenizer, margin)
        trained_to_the_end(master, algorithm, out / "checkpoints")  # a loop that trained past the end: refused
        if why := stopped_short(out / "checkpoints", master[algorithm]["max_num_steps"]):
            raise StoppedAtDeadline(f"{out.name}: {why}")
    metrics = stage_metrics(
        _tensorboard_scalars(Path(master["logger"]["log_dir"])), out / recipe.REWARD_LOG, args.stage
    )
    write_text_atomic(out / "metrics.jsonl", "".join(json.dumps(m) + "\n" for m in metrics))
    return out


def flush_tensorboard(logger: Any) -> None:
    """Write out what NeMo-RL's TensorBoard writers still hold, before the driver reads the event files.

    NeMo-RL's ``TensorboardLogger`` opens a ``SummaryWriter`` with its default 120 s flush interval and no
    train loop flushes or closes it (nemo_rl/utils/logger.py:125-129, ``Logger`` has no close), so the last
    steps of a stage may still sit in the writer's queue when ``*_train`` returns: a CI run read an empty
    ``metrics.jsonl`` from a 2-step SFT stage.
    """
    from nemo_rl.utils.logger import TensorboardLogger

    for backend in logger.loggers:
        if isinstance(backend, TensorboardLogger):
            backend.writer.flush()


def _renew_deadline(config: Any, margin_s: int) -> None:
    """Count the job's save deadline from now, when training starts.

    NeMo-RL's TimeoutChecker starts its clock in ``*_train``: the model loading and conversion in ``setup``
    must not be counted in.
    """
    config.checkpointing["checkpoint_must_save_by"] = recipe.must_save_by(margin_s)


def _grpo(master: dict[str, Any], tokenizer, margin_s: int) -> None:
    """As NeMo-RL's examples/run_grpo.py: its data setup (our dataset, processor and env by name), then GRPO."""
    from nemo_rl.algorithms.grpo import MasterConfig, grpo_train, setup
    from nemo_rl.data.utils import setup_response_data
    from nemo_rl.models.generation import configure_generation_config

    config = MasterConfig(**master)
    config.policy["generation"] = configure_generation_config(config.policy["generation"], tokenizer)
    dataset, val_dataset, task_to_env, val_task_to_env = setup_response_data(tokenizer, config.data, config.env)
    (policy, generation, _gym, _cluster, loader, val_loader, loss_fn, logger, ckpt, state, config, *_rest) = setup(
        config, tokenizer, dataset, val_dataset
    )
    _renew_deadline(config, margin_s)
    grpo_train(
        policy, generation, loader, val_loader, tokenizer, loss_fn, task_to_env, val_task_to_env, logger, ckpt, state,
        config,
    )  # fmt: skip
    flush_tensorboard(logger)


def _sft(master: dict[str, Any], tokenizer, margin_s: int) -> None:
    """As NeMo-RL's examples/run_sft.py setup_data: load_response_dataset + our processor, then SFT."""
    from nemo_rl.algorithms.sft import MasterConfig, setup, sft_train
    from nemo_rl.data.datasets import AllTaskProcessedDataset, load_response_dataset

    config = MasterConfig(**master)
    data = load_response_dataset(config.data["train"])
    dataset = AllTaskProcessedDataset(
        data.dataset,
        tokenizer,
        None,
        {data.task_name: (data.task_spec, data.processor)},
        max_seq_length=config.data["max_input_seq_length"],
    )
    (policy, _cluster, loader, val_loader, loss_fn, logger, ckpt, state, config) = setup(
        config, tokenizer, dataset, None
    )
    _renew_deadline(config, margin_s)
    sft_train(policy, loader, val_loader, tokenizer, loss_fn, config, logger, ckpt, state)
    flush_tensorboard(logger)


def _dpo(master: dict[str, Any], tokenizer, margin_s: int) -> None:
    """As NeMo-RL's examples/run_dpo.py: setup_preference_data (its preference_preprocessor), then DPO."""
    from nemo_rl.algorithms.dpo import MasterConfig, dpo_train, setup
    from nemo_rl.data.utils import setup_preference_data

    config = MasterConfig(**master)
    dataset, val_datasets = setup_preference_data(tokenizer, config.data)
    (policy, _cluster, loader, val_loaders, loss_fn, logger, ckpt, state, config) = setup(
        config, tokenizer, dataset, val_datasets
    )
    _renew_deadline(config, margin_s)
    dpo_train(policy, loader, val_loaders, tokenizer, loss_fn, config, logger, ckpt, state)
    flush_tensorboard(logger)


def parser() -> argparse.ArgumentParser:
    """Command-line arguments of the driver."""
    p = argparse.ArgumentParser(prog="python -m nemo_act.engines.nemo_rl.driver", description=__doc__.splitlines()[0])
    p.add_argument("--stage", required=True, choices=list(STAGE_KINDS))
    p.add_argument("--config", required=True, help="experiment config or cluster recipe (conf/recipes/...)")
    p.add_argument("--init", required=True, help="HF checkpoint the stage starts from")
    data = p.add_mutually_exclusive_group(required=True)
    data.add_argument("--data", help="pairs or experts JSONL (what the stage kind reads: nemo_act/stage_kinds.py)")
    data.add_argument("--rows", help="ready stage rows, one JSON object per line (what the runner passes)")
    p.add_argument("--out", required=True, help="stage folder")
    p.add_argument(
        "--prepare-only",
        action="store_true",
        help="write the stage's rows and NeMo-RL config (for NeMo-RL's own examples/run_*.py) and stop",
    )
    p.add_argument("overrides", nargs="*", help="dotted.key=value or group=option overrides of --config")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point: 0 when the stage trained to its last step, :data:`.launch.STOPPED_EXIT` when it stopped short."""
    try:
        run(parser().parse_args(argv))
    except StoppedAtDeadline as err:
        print(err, flush=True)
        return STOPPED_EXIT
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
