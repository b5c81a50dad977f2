"""Exact resume for the local engine's TRL trainers: a resumed stage ends where the run never killed ends.

Its weights and logged metrics are the same.

transformers' checkpoint already holds the weights, optimizer, scheduler, the Python/NumPy/torch/CUDA RNG states
(``Trainer._save_rng_state``) and the TrainerState, and SFT/DPO data order is seeded per epoch (accelerate's
``SeedableRandomSampler``). Read in TRL 1.16 and transformers 5.24, a resumed run still differed in two ways:

- **GRPO's data order.** TRL's ``RepeatSampler`` (``trl/trainer/utils.py``) draws every epoch's order from one
  ``torch.Generator`` seeded once and has no ``set_epoch``, so a run resumed in epoch e replayed epoch 0's order
  (a 12-step ACT stage of 3-step epochs, killed at checkpoint 4 and resumed, sampled other prompts from step 6).
  :class:`EpochRepeatSampler` gives epoch e the e-th order of the seeded generator, which is what the
  uninterrupted run draws, when transformers' epoch loop calls ``set_epoch`` (through accelerate's
  ``DataLoaderShard.set_epoch``).
- **Logged totals.** ``Trainer._inner_training_loop`` resets the running loss sum, the loss accumulated since the
  last log and that log's step on every ``train()`` call, SFT/DPO's ``_total_train_tokens`` starts at 0 and TRL's
  per-step metrics gathered since the last log (``_metrics["train"]``: rewards, KL, entropy...) start empty, so
  after a resume ``num_tokens`` restarted, ``train_loss`` covered only the resumed steps and the first log after a
  resume between two logs averaged only the steps after it. They are written into
  each checkpoint (:data:`TOTALS`, before transformers' ``trainer_state.json``, the file that marks a checkpoint
  whole) and restored when training begins; ``train_loss`` is then the whole run's mean.
- **A resume from the final checkpoint.** A kill after the last checkpoint is whole but before the stage hands over
  its weights resumed from that checkpoint, and transformers' epoch loop (``Trainer._run_epoch``) takes a step before
  it checks ``max_steps``: the stage trained one step too many wherever ``max_steps`` is not the end of an epoch (at
  an epoch's end the epoch loop does not run). :meth:`ExactResume._run_epoch` runs no epoch once ``max_steps`` is
  reached, so the stage ends as the uninterrupted run did: the checkpoint's weights, the same final log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch  # noqa: TID253
from transformers import TrainerCallback  # noqa: TID253
from trl.trainer.utils import RepeatSampler  # noqa: TID253

from nemo_act.data.io import write_text_atomic

TOTALS = "run_totals.json"  # in each TRL checkpoint folder


_SAMPLER_ARGUMENTS = ("data_source", "mini_repeat_count", "batch_size", "repeat_count", "shuffle", "seed")
"""TRL's ``RepeatSampler.__init__`` arguments, each kept as an attribute of the same name."""


class EpochRepeatSampler(RepeatSampler):
    """TRL's RepeatSampler whose epoch e order is the seeded generator's e-th, however the run got to epoch e."""

    def set_epoch(self, epoch: int) -> None:
        """Rewind the generator to where an uninterrupted run stands before epoch ``epoch``'s order is drawn."""
        if not self.shuffle or self.seed is None:
            return
        self.generator.manual_seed(self.seed)
        for _ in range(epoch):  # one permutation per epoch, as RepeatSampler.__iter__ draws it
            torch.randperm(self.num_samples, generator=self.generator)


class _RestoreTotals(TrainerCallback):
    """At train begin, puts back the totals saved in the checkpoint the trainer resumes from."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Restore the running loss, pending loss, last logged step, token count and pending metrics."""
        resume = getattr(self.trainer, "_resumed_from", None)
        if not resume or not (Path(resume) / TOTALS).is_file():
            return  # a fresh run, or a checkpoint written before this file existed
        totals = json.loads((Path(resume) / TOTALS).read_text())
        t = self.trainer
        t._total_loss_scalar = totals["total_loss"]
        t._tr_loss = torch.tensor(totals["pending_loss"], device=args.device)
        t._globalstep_last_logged = totals["last_logged"]
        if totals["train_tokens"] is not None:
            t._total_train_tokens = totals["train_tokens"]
        if hasattr(t, "_metrics"):
            t._metrics["train"].update(totals["metrics"])


class ExactResume:
    """Mixin for a TRL trainer class: see the module docstring. Build classes with :func:`resumable`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_callback(_RestoreTotals(self))

    def _get_train_sampler(self, *args: Any, **kwargs: Any) -> Any:
        sampler = super()._get_train_sampler(*args, **kwargs)
        if type(sampler) is RepeatSampler:  # the same sampler, rebuilt from its own constructor arguments
            return EpochRepeatSampler(**{name: getattr(sampler, name) for name in _SAMPLER_ARGUMENTS})
        return sampler

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        folder = Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}"
        folder.mkdir(parents=True, exist_ok=True)
        totals = {
            "total_loss": self._total_loss_scalar,
            "pending_loss": float(self._tr_loss.item()),
            "last_logged": self._globalstep_last_logged,
            "train_tokens": getattr(self, "_total_train_tokens", None),
            "metrics": {k: list(v) for k, v in getattr(self, "_metrics", {}).get("train", {}).items()},
        }
        write_text_atomic(folder / TOTALS, json.dumps(totals))
        super()._save_checkpoint(model, trial)

    def _run_epoch(self, *args: Any, **kwargs: Any) -> Any:
        if self.state.max_steps > 0 and self.state.global_step >= self.state.max_steps:
            self.control.should_training_stop = True  # resumed at or past the end: nothing left to train
            # in train mode as after a step: TRL's log() puts the pending per-step metrics in the final log only then
            kwargs.get("model", self.model).train()
            return None
        return super()._run_epoch(*args, **kwargs)

    def train(self, resume_from_checkpoint: str | None = None, **kwargs: Any) -> Any:
        """``Trainer.train``, then ``train_loss`` in the last log entry is the whole run's mean loss per step."""
        self._resumed_from = resume_from_checkpoint
        out = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        last = self.state.log_history[-1] if self.state.log_history else {}
        if "train_loss" in last and self.state.global_step:
            last["train_loss"] = self._total_loss_scalar / self.state.global_step
        return out


def resumable(trainer_cls: type) -> type:
    """``trainer_cls`` with :class:`ExactResume` mixed in (same name, so logs and model cards read as before)."""
    if not hasattr(trainer_cls, "_run_epoch"):  # the loop ExactResume stops at max_steps (transformers 5.25)
        import transformers

        raise RuntimeError(
            f"transformers {transformers.__version__} has no Trainer._run_epoch, where nemo-act stops a resumed "
            "stage at max_steps: install the version pyproject.toml pins (pip install -e '.[local]')"
        )
    return type(trainer_cls.__name__, (ExactResume, trainer_cls), {"__module__": __name__})
