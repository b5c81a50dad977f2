"""What a local stage shows while it trains: one progress bar with the few numbers that matter.

transformers' own output is a bar plus the raw log dict printed at every logging step (``ProgressCallback``
/ ``PrinterCallback``); :func:`use_stage_bar` replaces both with :class:`StageBar`, one tqdm bar per stage
whose postfix holds the loss (SFT, DPO) or the mean reward (GRPO) and the selection accuracy (ACT
stages), with the step rate. The libraries' own bars and FutureWarnings are off in nemo-act's entry
points (:mod:`nemo_act.common.quiet`). Every logged
number still goes to the stage's ``metrics.jsonl``, and to TensorBoard or W&B when ``train.report_to``
asks (the trainer's own integrations).
"""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm
from transformers import TrainerCallback  # noqa: TID253

# logged key -> shown name, in the order shown (the first present of each group)
SHOWN = (
    ("loss", "loss"),
    ("reward", "reward"),
    ("rewards/selection_accuracy/mean", "sel acc"),
    ("rewards/accuracy/mean", "acc"),
)


class StageBar(TrainerCallback):
    """One bar per stage: steps done of ``max_steps``, with loss or reward and selection accuracy."""

    def __init__(self, stage: str) -> None:
        """Args: stage: the stage's name shown at the left of the bar."""
        self.stage = stage
        self.bar: Any = None
        self.shown: dict[str, str] = {}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Open the bar (a resumed stage starts at its checkpoint's step)."""
        self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc=self.stage, unit="step")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Advance to the trainer's step."""
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Show the latest loss / reward / selection accuracy (the end-of-training summary is skipped)."""
        if self.bar is None or not logs or "train_runtime" in logs:
            return
        for key, name in SHOWN:
            if key in logs:
                self.shown[name] = f"{float(logs[key]):.3g}"
        self.bar.set_postfix(self.shown, refresh=True)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def use_stage_bar(trainer: Any, stage: str) -> None:
    """Replace the trainer's printing callbacks (bar + raw dict per log) with a :class:`StageBar`."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(StageBar(stage))
