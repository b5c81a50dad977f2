"""Megatron-Bridge bridges for Olmo-3 and Olmo-2 (HF ``Olmo3ForCausalLM``, ``Olmo2ForCausalLM``).

Megatron-Bridge 0.6 ships none (only OLMoE), and the Olmo-3-7B recipes train on Megatron, so this
module adds them to its registry (``MegatronModelBridge.register_bridge``; importing it registers).
What differs from a Llama/Qwen-style decoder, and how it is built on Megatron-Core:

* **Post-sublayer norms, no pre-norms.** Olmo normalises the *output* of attention and of the MLP
  before the residual add (``post_attention_layernorm``, ``post_feedforward_layernorm``). The layer has
  identity input / pre-MLP norms, and the output projections (``linear_proj``, ``linear_fc2``) carry
  an RMSNorm on their output (``post_layernorm``): Megatron-Bridge's ``TERowParallelLinearLayerNorm``
  with Transformer Engine, :class:`RowParallelLinearPostNorm` without.
* **QK-norm over the whole projection.** ``q_norm`` / ``k_norm`` have ``heads x head_dim`` weights and
  normalise each token's full query / key vector, not each head (Qwen3, Megatron's ``qk_layernorm``).
  :class:`QFullProjectionNorm` / :class:`KFullProjectionNorm` do that on Megatron's per-rank heads: the
  sum of squares is all-reduced over the tensor-parallel group (forward and backward), and the weight
  is split over TP ranks like the heads (checkpointed as a TP-sharded tensor).
* **Sliding-window layers (Olmo-3).** ``layer_types`` says which layers attend over a window of
  ``sliding_window`` tokens: ``window_size = (sliding_window - 1, 0)`` and ``window_attn_skip_freq`` =
  one flag per layer (Megatron-Core's per-layer window switch).

RoPE (default, or YaRN from ``rope_scaling``) and the rest of the config come from Megatron-Bridge's
generic HF config mapping. Parameter names are the same with and without Transformer Engine, so a
checkpoint written on a CPU node trains on GPUs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from megatron.bridge.models.conversion.mapping_registry import MegatronMappingRegistry
from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge
from megatron.bridge.models.conversion.param_mapping import (
    AutoMapping,
    ColumnParallelMapping,
    GatedMLPMapping,
    QKVMapping,
    ReplicatedMapping,
    RowParallelMapping,
)
from megatron.bridge.models.gpt_provider import GPTModelProvider
from megatron.core import parallel_state, tensor_parallel
from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add
from megatron.core.models.gpt.gpt_model import GPTModel
from megatron.core.transformer.attention import SelfAttention, SelfAttentionSubmodules
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.identity_op import IdentityOp
from megatron.core.transformer.mlp import MLP, MLPSubmodules
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_layer import TransformerLayer, TransformerLayerSubmodules
from megatron.core.transformer.utils import make_sharded_tensors_for_checkpoint
from transformers import Olmo2ForCausalLM, Olmo3ForCausalLM


class RMSNorm(torch.nn.Module):
    """RMSNorm computed in float32 like HF Olmo's (replicated over TP ranks)."""

    def __init__(self, config, hidden_size: int, eps: float | None = None) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=config.params_dtype))
        self.eps = config.layernorm_epsilon if eps is None else eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise the last dimension."""
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.float() * xf).to(x.dtype)


class RowParallelLinearPostNorm(tensor_parallel.RowParallelLinear):
    """Row-parallel linear whose (reduced) output goes through an RMSNorm: Olmo's post-sublayer norm."""

    def __init__(self, input_size: int, output_size: int, *, config, **kwargs) -> None:
        super().__init__(input_size, output_size, config=config, **kwargs)
        self.post_layernorm = RMSNorm(config, output_size)

    def forward(self, x):
        """Project, then normalise the output (no bias: it would have to be added before the norm)."""
        output, bias = super().forward(x)
        if bias is not None:
            raise ValueError("RowParallelLinearPostNorm needs add_bias_linear=False")
        return self.post_layernorm(output), bias


class _AllReduceSum(torch.autograd.Function):
    """All-reduce over the TP group in forward and backward (every rank uses the sum)."""

    @staticmethod
    def forward(ctx, x):  # noqa: D102
        group = parallel_state.get_tensor_model_parallel_group()
        x = x.clone()
        torch.distributed.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        group = parallel_state.get_tensor_model_parallel_group()
        grad = grad.clone()
        torch.distributed.all_reduce(grad, group=group)
        return grad


class _FullProjectionNorm(MegatronModule):
    """RMSNorm over all heads of a token's query (or key), on this rank's heads (see module docstring)."""

    heads_attr = "num_attention_heads"

    def __init__(self, hidden_size: int, config, eps: float | None = None) -> None:
        super().__init__(config=config)
        self.tp = parallel_state.get_tensor_model_parallel_world_size()
        heads = getattr(config, self.heads_attr) or config.num_attention_heads
        if heads % self.tp:
            raise ValueError(f"{self.heads_attr}={heads} is not divisible by tensor parallel size {self.tp}")
        self.full_size = heads * hidden_size
        self.weight = torch.nn.Parameter(torch.ones(heads // self.tp * hidden_size, dtype=config.params_dtype))
        tensor_parallel.set_tensor_model_parallel_attributes(self.weight, is_parallel=True, dim=0, stride=1)
        self.eps = config.layernorm_epsilon if eps is None else eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[sq, b, heads_on_this_rank, head_dim]``."""
        flat = x.float().reshape(*x.shape[:-2], -1)
        sumsq = flat.pow(2).sum(-1, keepdim=True)
        if self.tp > 1:
            sumsq = _AllReduceSum.apply(sumsq)
        out = flat * torch.rsqrt(sumsq / self.full_size + self.eps) * self.weight.float()
        return out.reshape(x.shape).to(x.dtype)

    def sharded_state_dict(self, prefix: str = "", sharded_offsets: tuple = (), metadata=None):
        """The weight is split over TP ranks along its only axis."""
        state = self.state_dict(prefix="", keep_vars=True)
        return make_sharded_tensors_for_checkpoint(state, prefix, {"weight": 0}, sharded_offsets)


class QFullProjectionNorm(_FullProjectionNorm):
    """Olmo's ``q_norm``: over ``num_attention_heads x head_dim``."""

    heads_attr = "num_attention_heads"


class KFullProjectionNorm(_FullProjectionNorm):
    """Olmo's ``k_norm``: over ``num_key_value_heads x head_dim`` (Megatron's query groups)."""

    heads_attr = "num_query_groups"


def olmo3_layer_spec(config: GPTModelProvider) -> ModuleSpec:
    """The Olmo-2/3 decoder layer: Transformer Engine linears and attention where TE is installed."""
    try:
        from megatron.core.extensions.transformer_engine import HAVE_TE
    except ImportError:
        HAVE_TE = False
    return _olmo3_spec(te=HAVE_TE)


def olmo3_local_layer_spec(config: GPTModelProvider) -> ModuleSpec:
    """The Olmo-2/3 decoder layer with Megatron-Core's local linears and attention (CPU loads, TE or not)."""
    return _olmo3_spec(te=False)


def _olmo3_spec(te: bool) -> ModuleSpec:
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    linear_in, linear_out = tensor_parallel.ColumnParallelLinear, RowParallelLinearPostNorm
    attention = DotProductAttention
    if te:
        from megatron.bridge.models.common.te_layers import TERowParallelLinearLayerNorm
        from megatron.core.extensions.transformer_engine import TEColumnParallelLinear, TEDotProductAttention

        linear_in, linear_out, attention = TEColumnParallelLinear, TERowParallelLinearLayerNorm, TEDotProductAttention
    return ModuleSpec(
        module=TransformerLayer,
        submodules=TransformerLayerSubmodules(
            input_layernorm=IdentityOp,
            self_attention=ModuleSpec(
                module=SelfAttention,
                params={"attn_mask_type": AttnMaskType.causal},
                submodules=SelfAttentionSubmodules(
                    linear_qkv=linear_in,
                    core_attention=attention,
                    linear_proj=linear_out,
                    q_layernorm=QFullProjectionNorm,
                    k_layernorm=KFullProjectionNorm,
                ),
            ),
            self_attn_bda=get_bias_dropout_add,
            pre_mlp_layernorm=IdentityOp,
            mlp=ModuleSpec(module=MLP, submodules=MLPSubmodules(linear_fc1=linear_in, linear_fc2=linear_out)),
            mlp_bda=get_bias_dropout_add,
        ),
    )


@MegatronModelBridge.register_bridge(source=Olmo3ForCausalLM, target=GPTModel, model_type="olmo3")
class Olmo3Bridge(MegatronModelBridge):
    """HF ``Olmo3ForCausalLM`` <-> Megatron-Core ``GPTModel`` with :func:`olmo3_layer_spec`."""

    def provider_bridge(self, hf_pretrained):
        """Megatron config of an Olmo HF config."""
        provider = super().provider_bridge(hf_pretrained)
        cfg = hf_pretrained.config
        provider.normalization = "RMSNorm"
        provider.gated_linear_unit = True
        provider.activation_func = F.silu
        provider.add_bias_linear = False
        provider.add_qkv_bias = False
        provider.hidden_dropout = 0.0
        provider.attention_dropout = 0.0
        provider.qk_layernorm = True
        provider.transformer_layer_spec = olmo3_layer_spec
        provider.share_embeddings_and_output_weights = bool(getattr(cfg, "tie_word_embeddings", False))
        layer_types = getattr(cfg, "layer_types", None)
        if layer_types and "sliding_attention" in layer_types and getattr(cfg, "sliding_window", None):
            provider.window_size = (cfg.sliding_window - 1, 0)  # HF: the last `sliding_window` tokens, self included
            provider.window_attn_skip_freq = [1 if t == "sliding_attention" else 0 for t in layer_types]
        return provider

    def mapping_registry(self) -> MegatronMappingRegistry:
        """Megatron <-> HF parameter names (``*`` = layer index)."""
        layer = "decoder.layers.*."
        hf = "model.layers.*."
        return MegatronMappingRegistry(
            AutoMapping("embedding.word_embeddings.weight", "model.embed_tokens.weight"),
            AutoMapping("output_layer.weight", "lm_head.weight"),
            AutoMapping("decoder.final_layernorm.weight", "model.norm.weight"),
            QKVMapping(
                megatron_param=layer + "self_attention.linear_qkv.weight",
                q=hf + "self_attn.q_proj.weight",
                k=hf + "self_attn.k_proj.weight",
                v=hf + "self_attn.v_proj.weight",
            ),
            ColumnParallelMapping(layer + "self_attention.q_layernorm.weight", hf + "self_attn.q_norm.weight"),
            ColumnParallelMapping(layer + "self_attention.k_layernorm.weight", hf + "self_attn.k_norm.weight"),
            RowParallelMapping(layer + "self_attention.linear_proj.weight", hf + "self_attn.o_proj.weight"),
            ReplicatedMapping(
                layer + "self_attention.linear_proj.post_layernorm.weight", hf + "post_attention_layernorm.weight"
            ),
            GatedMLPMapping(
                megatron_param=layer + "mlp.linear_fc1.weight",
                gate=hf + "mlp.gate_proj.weight",
                up=hf + "mlp.up_proj.weight",
            ),
            RowParallelMapping(layer + "mlp.linear_fc2.weight", hf + "mlp.down_proj.weight"),
            ReplicatedMapping(layer + "mlp.linear_fc2.post_layernorm.weight", hf + "post_feedforward_layernorm.weight"),
        )


@MegatronModelBridge.register_bridge(source=Olmo2ForCausalLM, target=GPTModel, model_type="olmo2")
class Olmo2Bridge(Olmo3Bridge):
    """HF ``Olmo2ForCausalLM``: Olmo-3's layer without sliding windows (its config has no ``layer_types``)."""
