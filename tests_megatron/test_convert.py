"""HF -> Megatron -> HF round trips on CPU (gloo): TP=1, TP=2, PP=2 (2 processes) and TP=2 x PP=2 (4 processes);
Qwen3-MoE at expert parallel 2."""

import re
import shutil
from pathlib import Path

import _megatron
import hf_to_megatron
import megatron_to_hf
import pytest
import torch
import verify
from safetensors.torch import load_file
from transformers import AutoTokenizer

LAYOUTS = [(1, 1), (2, 1), (1, 2), (2, 2)]  # (2, 2): four gloo processes


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in sorted(folder.glob("*.safetensors")):
        out.update(load_file(f))
    return out


MODELS = ["tiny_qwen3", "tiny_olmo3"]
CONVERT = Path(__file__).resolve().parents[1] / "tools" / "convert"


def _perturb_one_weight(hf_dir: Path) -> None:
    """Change one norm of an HF folder: another model, as far as the logit check can tell."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(hf_dir)
    with torch.no_grad():
        model.model.layers[1].post_attention_layernorm.weight.mul_(1.5)
    model.save_pretrained(hf_dir)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("tp,pp", LAYOUTS, ids=lambda v: str(v))
def test_round_trip_is_exact(request, model: str, tmp_path: Path, tp: int, pp: int):
    """HF -> Megatron (TP x PP processes) -> HF: logits agree on both sides, exported weights are the same bits."""
    hf = request.getfixturevalue(model)
    ckpt = tmp_path / "megatron"
    diff_in = hf_to_megatron.convert(str(hf), str(ckpt), tp=tp, pp=pp, device="cpu")
    back = tmp_path / "hf"
    diff_out = megatron_to_hf.export(str(ckpt), str(hf), str(back), device="cpu")
    assert diff_in is not None and diff_in < 1e-5 and diff_out is not None and diff_out < 1e-5
    _same_model(hf, back)


def test_olmo3_32b_shape_round_trip_is_exact_and_yarn_counts(tiny_olmo3_32b_shape: Path, tmp_path: Path):
    """The Olmo-3.1-32B recipe's model shape (GQA 5:1, YaRN, sliding windows) at TP=2 x PP=2 (4 processes), exact
    both ways; and YaRN is not a no-op on these inputs (the same weights with plain RoPE give other logits), so the
    check would catch a bridge that dropped it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    hf = tiny_olmo3_32b_shape
    ckpt, back = tmp_path / "megatron", tmp_path / "hf"
    diff_in = hf_to_megatron.convert(str(hf), str(ckpt), tp=2, pp=2, device="cpu")
    diff_out = megatron_to_hf.export(str(ckpt), str(hf), str(back), device="cpu")
    assert diff_in is not None and diff_in < 1e-5 and diff_out is not None and diff_out < 1e-5
    _same_model(hf, back)
    plain = AutoConfig.from_pretrained(hf)
    plain.rope_parameters = {"rope_type": "default", "rope_theta": plain.rope_parameters["rope_theta"]}
    ids = torch.randint(0, 320, (1, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        yarn = AutoModelForCausalLM.from_pretrained(hf)(ids).logits
        rope = AutoModelForCausalLM.from_pretrained(hf, config=plain)(ids).logits
    assert (yarn - rope).abs().max() > 1e-3


def test_moe_round_trip_at_expert_parallel_2_is_exact(tiny_qwen3_moe: Path, tmp_path: Path):
    """Qwen3-MoE written by 2 processes that each hold 2 of the 4 experts (EP=2), loaded back into one: exact."""
    ckpt, back = tmp_path / "megatron", tmp_path / "hf"
    diff_in = hf_to_megatron.convert(str(tiny_qwen3_moe), str(ckpt), ep=2, device="cpu")
    diff_out = megatron_to_hf.export(str(ckpt), str(tiny_qwen3_moe), str(back), device="cpu")
    assert diff_in is not None and diff_in < 1e-5 and diff_out is not None and diff_out < 1e-5
    _same_model(tiny_qwen3_moe, back)


def test_olmo2_round_trip_is_exact(tiny_olmo2: Path, tmp_path: Path):
    ckpt = tmp_path / "megatron"
    hf_to_megatron.convert(str(tiny_olmo2), str(ckpt), tp=2, device="cpu")
    back = tmp_path / "hf"
    megatron_to_hf.export(str(ckpt), str(tiny_olmo2), str(back), device="cpu")
    _same_model(tiny_olmo2, back)


def _same_model(hf: Path, back: Path) -> None:
    original, exported = _weights(hf), _weights(back)
    assert set(original) == set(exported)
    assert all(torch.equal(original[k], exported[k]) for k in original), "exported weights must be bit-equal"
    tok, ref = AutoTokenizer.from_pretrained(back), AutoTokenizer.from_pretrained(hf)
    assert tok.chat_template == ref.chat_template and tok.chat_template
    assert tok("open fridge")["input_ids"] == ref("open fridge")["input_ids"]


def test_verify_fails_on_a_different_model(tiny_qwen3: Path, tmp_path: Path):
    """A checkpoint compared against another model's HF folder must fail the check, not pass it."""
    from transformers import AutoModelForCausalLM

    ckpt = tmp_path / "megatron"
    hf_to_megatron.convert(str(tiny_qwen3), str(ckpt), device="cpu", check=False)
    other = tmp_path / "other"
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen3)
    with torch.no_grad():
        model.model.layers[1].post_attention_layernorm.weight.mul_(1.5)  # one norm changed
    model.save_pretrained(other)
    assert verify.max_logit_diff(other, ckpt) > 1e-3
    with pytest.raises(SystemExit):
        verify.check(other, ckpt, "cpu", 1e-5)


def test_autoregister_makes_any_process_know_the_olmo_bridge(tiny_olmo3: Path):
    """What NeMo-RL's Megatron workers get (the cluster engine's PYTHONPATH): no import of ours in the code.

    The probe is Megatron-Bridge's own dispatch (``get_model_bridge``, what a conversion calls): its
    ``AutoBridge.can_handle`` is no probe across versions (megatron-bridge 0.5.0's accepts any ``*ForCausalLM``).
    """
    import os
    import subprocess
    import sys

    convert = Path(__file__).resolve().parents[1] / "tools" / "convert"
    code = (
        "import cpu_shims; cpu_shims.patch_cuda_calls(); cpu_shims.import_bridge_without_te()\n"
        "from megatron.bridge.models.conversion.model_bridge import get_model_bridge\n"
        "from transformers import Olmo3ForCausalLM\n"
        "try:\n"
        "    print('BRIDGE', type(get_model_bridge(Olmo3ForCausalLM)).__name__)\n"
        "except Exception as err:\n"
        "    print('BRIDGE none', type(err).__name__)\n"
    )

    def bridge(pythonpath: str) -> str:
        env = {**os.environ, "PYTHONPATH": pythonpath}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return next(line for line in out.stdout.splitlines() if line.startswith("BRIDGE"))

    assert bridge(f"{convert / 'autoregister'}{os.pathsep}{convert}") == "BRIDGE Olmo3Bridge"
    assert bridge(str(convert)).startswith("BRIDGE none")


@pytest.mark.parametrize("model", MODELS)
def test_the_cluster_export_of_a_bf16_training_checkpoint_passes_verify(request, model: str, tmp_path: Path):
    """The export as the cluster engine runs it: the command ``launch.export_command`` builds (the Megatron venv's
    Python, ``--device cpu``: gloo, float32, as NeMo-RL's ``export_model_from_megatron`` in
    ``nemo_rl/models/megatron/community_import.py``), in its own process with the stage environment, on a
    checkpoint holding bf16 weights at TP=2 as a bf16 training job saves them. Its logit check must pass, and
    the exported weights must be the checkpoint's bf16 values."""
    import os
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nemo_act.engines.nemo_rl import interpreters
    from nemo_act.engines.nemo_rl.launch import export_command

    hf = request.getfixturevalue(model)
    ckpt = tmp_path / "megatron"
    hf_to_megatron.convert(str(hf), str(ckpt), tp=2, device="cpu", check=False, dtype="bfloat16")
    os.environ["NEMO_ACT_PYTHON_MCORE"] = sys.executable  # this venv stands for the container's Megatron venv
    try:
        cmd = export_command(ckpt, str(hf), tmp_path / "hf")
    finally:
        del os.environ["NEMO_ACT_PYTHON_MCORE"]
    assert cmd[0] == sys.executable and cmd[-2:] == ["--device", "cpu"]
    res = subprocess.run(cmd, env=interpreters.child_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    print(res.stdout)  # the verify line (shown with pytest -rP)
    assert "verify: max |logit diff|" in res.stdout and " OK" in res.stdout
    original, exported = _weights(hf), _weights(tmp_path / "hf")
    assert set(original) == set(exported)
    assert all(torch.equal(original[k].to(torch.bfloat16), exported[k].to(torch.bfloat16)) for k in original)


def _as_nemo_rl_saves_it(ckpt: Path, fp8: bool) -> None:
    """Rewrite a checkpoint's run_config.yaml as a NeMo-RL training job leaves it.

    NeMo-RL builds its model from Megatron-Bridge's provider, whose ``transformer_layer_spec`` defaults to
    ``gpt_provider.default_layer_spec`` (Transformer Engine layers; megatron/bridge/models/gpt_provider.py:170),
    sets ``bf16`` from ``policy.precision`` (nemo_rl/models/megatron/setup.py:768) and, for an FP8 recipe, copies
    ``megatron_cfg.fp8_cfg`` onto it (setup.py:870-875; ours: e4m3, blockwise, fp8_param false), and GPU
    training does not initialise on CPU. The weights stay as written (the same names under either spec).
    """
    import yaml

    for config in ckpt.glob("iter_*/run_config.yaml"):
        run = yaml.safe_load(config.read_text())
        model = run["model"]
        if model["transformer_layer_spec"]["_target_"].endswith(".local_layer_spec"):
            model["transformer_layer_spec"]["_target_"] = "megatron.bridge.models.gpt_provider.default_layer_spec"
        model.update(bf16=True, use_cpu_initialization=False)
        if fp8:
            model.update(fp8="e4m3", fp8_recipe="blockwise", fp8_param=False)
        config.write_text(yaml.safe_dump(run, sort_keys=False))


@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
def test_the_cpu_export_checks_a_checkpoint_written_the_way_nemo_rl_writes_it(tiny_qwen3: Path, tmp_path: Path, fp8):
    """Issue 21, finding 4: the export's logit check ran a forward on CPU through the Transformer Engine layers
    the checkpoint's config names (a venv without TE could not even build them: "'NoneType' object is not
    callable"). On CPU the loader now takes the spec's local twin (_megatron.CPU_LAYER_SPECS); the check passes
    on the real export and still fails against another model."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nemo_act.engines.nemo_rl import interpreters

    ckpt = tmp_path / "step_4" / "policy" / "weights"
    hf_to_megatron.convert(str(tiny_qwen3), str(ckpt), tp=2, device="cpu", check=False, dtype="bfloat16")
    _as_nemo_rl_saves_it(ckpt, fp8)
    assert _megatron.checkpoint_layer_spec(ckpt) == "megatron.bridge.models.gpt_provider.default_layer_spec"
    out = tmp_path / "hf"
    cmd = [sys.executable, str(CONVERT / "megatron_to_hf.py"), "--megatron-ckpt", str(ckpt), "--hf-ref",
           str(tiny_qwen3), "--out", str(out), "--device", "cpu"]  # fmt: skip
    res = subprocess.run(cmd, env=interpreters.child_env(), capture_output=True, text=True)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert re.search(r"verify: max \|logit diff\| = .* OK", res.stdout)
    other = tmp_path / "other"
    shutil.copytree(out, other)
    _perturb_one_weight(other)
    check = [sys.executable, str(CONVERT / "verify.py"), "--hf", str(other), "--megatron-ckpt", str(ckpt)]
    res = subprocess.run([*check, "--device", "cpu"], env=interpreters.child_env(), capture_output=True, text=True)
    assert res.returncode == 1 and "FAILED" in res.stdout, (res.stdout + res.stderr)[-3000:]


def test_every_transformer_engine_spec_has_a_local_twin_for_cpu_loads(tmp_path: Path):
    """Olmo checkpoints name our olmo3_layer_spec, which picks TE where it is installed: on CPU the local one."""
    import cpu_shims

    cpu_shims.import_bridge_without_te()  # as every converter process does first on CPU
    import olmo3_bridge

    overrides = _megatron.load_overrides("cpu")
    assert "transformer_layer_spec" not in overrides  # no checkpoint given: nothing to look up
    for named, local in _megatron.CPU_LAYER_SPECS.items():
        run = tmp_path / named / "iter_0000007"
        run.mkdir(parents=True)
        spec_yaml = f"model:\n  transformer_layer_spec:\n    _call_: false\n    _target_: {named}\n"
        (run / "run_config.yaml").write_text(spec_yaml)
        spec = _megatron.load_overrides("cpu", ckpt=run.parent)["transformer_layer_spec"]
        assert f"{spec.__module__}.{spec.__name__}" == local
    assert olmo3_bridge.olmo3_local_layer_spec(None).submodules.self_attention.submodules.linear_qkv.__name__ == (
        "ColumnParallelLinear"
    )
    assert "transformer_layer_spec" not in _megatron.load_overrides("cuda", ckpt=run.parent)  # GPUs: TE as saved


def test_the_cpu_shims_apply_where_a_gpu_is_visible(monkeypatch):
    """The cluster engine exports on CPU on a GPU node (the Megatron worker venv, CUDA visible): the shims used to
    return early wherever ``torch.cuda.is_available()``, leaving the rotary embedding's CUDA calls in place."""
    import cpu_shims

    names = ("current_device", "synchronize", "get_rng_state", "get_rng_state_all", "set_rng_state",
             "set_rng_state_all", "manual_seed", "manual_seed_all")  # fmt: skip
    for name in names:  # restored after the test
        monkeypatch.setattr(torch.cuda, name, getattr(torch.cuda, name))
    for name in ("get_rng_state", "set_rng_state", "manual_seed"):
        monkeypatch.setattr(torch.cuda.random, name, getattr(torch.cuda.random, name))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cpu_shims.patch_cuda_calls()
    assert torch.cuda.current_device() == "cpu"
    assert torch.equal(torch.cuda.random.get_rng_state(), torch.get_rng_state())
