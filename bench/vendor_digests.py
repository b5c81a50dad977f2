"""Per-step digests of the demo's ACT stage, to find where two CPUs part ways (issue 59, item 4).

Under ``cpu_numerics: portable`` an Intel and an AMD machine make the demo's warm-up, pairs and initial policy byte for
byte alike, and its ACT stage (GRPO) ends elsewhere (README keeps a block per vendor). This script runs that stage,
the ``act_il_rl`` pipeline's first, from the demo's warm-up for ``--steps`` optimizer steps with the demo's own
settings and records, for each step, the sha256 of

* ``prompts``: the prompt token ids of the step's generation batch (what the sampler and the data order gave);
* ``completions``: the completion token ids sampled (generation: prefill, decoding, sampling);
* ``advantages``: the advantages (rewards, group normalisation), as float32 bytes;
* ``weights``: every parameter after the optimizer step (loss, backward, clipping, AdamW), float32 bytes in name order.

``--compare A B`` names the first step and the first of those four that differ between two such files: generation or
training, the step it starts. The files of both vendors go in ``docs/results/vendor_digests/<vendor_id>.json``;
one vendor's is committed from a machine of that vendor, the other is compared against it on the other.

Usage:
  python bench/vendor_digests.py [--demo-dir runs/demo] [--steps 12]     (writes docs/results/vendor_digests/)
  python bench/vendor_digests.py --compare A.json B.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

PARTS = ("prompts", "completions", "advantages", "weights")
RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "vendor_digests"


def _sha(tensor) -> str:
    """sha256 of a tensor's bytes (float tensors as float32, integer ones as int64), row-major."""
    import torch

    t = tensor.detach().cpu().contiguous()
    t = t.to(torch.float32) if t.is_floating_point() else t.to(torch.int64)
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()


def compare(a: Path, b: Path) -> int:
    """Print the first step and part where two digest files differ; 0 when they agree on every shared step."""
    first, second = json.loads(a.read_text()), json.loads(b.read_text())
    print(f"{a}: {first['cpu']}\n{b}: {second['cpu']}")
    for x, y in zip(first["steps"], second["steps"], strict=False):
        for part in PARTS:
            if x[part] != y[part]:
                print(f"first difference: step {x['step']}, {part} ({x[part][:12]} vs {y[part][:12]})")
                return 1
    n = min(len(first["steps"]), len(second["steps"]))
    print(f"the same for all {n} steps both files hold")
    return 0


def main() -> int:
    """Run the ACT stage with digests, or compare two digest files."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo-dir", type=Path, default=Path("runs/demo"), help="a demo folder: its warm-up is reused")
    ap.add_argument("--steps", type=int, default=12, help="optimizer steps of the ACT stage to record")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for <vendor_id>.json")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)

    from rich.console import Console

    from nemo_act.common.numerics import apply_cpu_numerics
    from nemo_act.common.paths import conf_root
    from nemo_act.config import load_config

    cfg = load_config(conf_root() / "demo.yaml", [f"run_dir={args.demo_dir}"])
    apply_cpu_numerics(cfg.cpu_numerics)  # before torch is imported, as `nemo-act demo` does

    from trl import GRPOTrainer

    from nemo_act.run.demo import _pipeline_cfg
    from nemo_act.run.pipeline import PipelineRunner
    from nemo_act.run.warmup import warm_up

    console = Console()
    data = args.demo_dir / "data"
    warm = warm_up(cfg, args.demo_dir, data, console)  # reused where the demo made it
    pcfg = _pipeline_cfg(cfg, "act_il_rl", warm.init)
    act = pcfg.train.act.model_copy(update={"max_steps": args.steps})  # constant LR: the demo's first steps
    pcfg = pcfg.model_copy(
        update={
            "train": pcfg.train.model_copy(update={"act": act}),
            "pipeline": pcfg.pipeline.model_copy(update={"stages": ["act"]}),
        }
    )
    steps: list[dict[str, str | int]] = []
    generate, init = GRPOTrainer._generate_and_score_completions, GRPOTrainer.__init__

    def recorded(self, inputs):  # the step's generation batch, as the trainer made it
        out = generate(self, inputs)
        parts = {"prompts": out["prompt_ids"], "completions": out["completion_ids"], "advantages": out["advantages"]}
        steps.append({"step": len(steps) + 1, **{k: _sha(v) for k, v in parts.items()}})
        return out

    def with_weights(self, *a, **kw):  # the weights after each optimizer step
        init(self, *a, **kw)
        self.add_callback(_Weights(steps))

    GRPOTrainer._generate_and_score_completions = recorded
    GRPOTrainer.__init__ = with_weights
    with tempfile.TemporaryDirectory() as tmp:
        runner = PipelineRunner(pcfg, Path(tmp) / "run", data_dir=data, console=console)
        pairs = runner.pairs(warm.experts, "pairs.jsonl")
        runner.run_stage(1, "act", warm.init, {"experts": warm.experts, "pairs": pairs})
    vendor, model = _cpu()
    out = args.out / f"{vendor}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    import torch

    record = {"cpu": f"{vendor}, {model}", "torch": torch.__version__, "numerics": cfg.cpu_numerics, "steps": steps}
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(steps)} steps -> {out}")
    return 0


def _cpu() -> tuple[str, str]:
    """The CPU's vendor_id and model name (/proc/cpuinfo)."""
    info = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    return info.get("vendor_id", "unknown"), info.get("model name", "unknown")


def _Weights(steps: list[dict[str, str | int]]):  # noqa: N802  (a TrainerCallback, built where transformers is loaded)
    """A callback that adds the weights' digest to the step just recorded."""
    from transformers import TrainerCallback

    class Weights(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            h = hashlib.sha256()
            for name, param in sorted(model.named_parameters()):
                h.update(f"{name}:{_sha(param)}".encode())
            steps[-1]["weights"] = h.hexdigest()

    return Weights()


if __name__ == "__main__":
    sys.exit(main())
