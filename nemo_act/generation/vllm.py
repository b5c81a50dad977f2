"""vLLM backend (``generation.backend=vllm``): offline ``LLM.generate`` for pairs and evaluation at scale.

The same :class:`~nemo_act.generation.base.Generator` protocol as the HF backend, so ``nemo-act
pairs`` and ``nemo-act eval`` run unchanged on a GPU node; the prompt text is the core's chat
rendering (``apply_chat_template`` with ``model.enable_thinking``), identical to what training sees.

* Tensor parallel over ``generation.vllm.tensor_parallel`` GPUs; ``gpu_memory_utilization`` and
  ``max_model_len`` (= ``model.max_context_tokens``) from config.
* Each request gets its own seed derived from (seed, request key), so its random stream does not depend
  on what else is in the batch: ``nemo-act pairs`` appends one batch at a time on a fixed grid, and a
  resumed run asks for exactly the requests, with the same seeds, that an uninterrupted one would. The
  sampled tokens need not repeat: vLLM's logits change with the batch a request shares a forward pass
  with (its engine, its neighbours, the batch size) unless batch invariance is on
  (``generation.vllm.batch_invariant``: ``VLLM_BATCH_INVARIANT=1`` in the data steps' engine actors only, never
  the job's environment, which NeMo-RL copies into every training worker and rollout engine; the device check's
  rate part measures its cost). docs/cluster.md says what repeats on vLLM and what does not.
* Generation stops after ``</action>`` (kept in the output) or at the end of the turn.
* :meth:`VLLMGenerator.score` sums the prompt log-probabilities vLLM returns for the continuation
  tokens (forced-choice selection). The engine runs with prefix caching off: with it on, vLLM's
  ``prompt_logprobs`` of a cached prefix depend on which requests ran before (vLLM issue #42019, open;
  forced choice scores two continuations of one prompt, exactly that case). Sampling loses little:
  a state's K samples are one request (``n=K``), and prompts rarely share long prefixes otherwise.
* Prompts go to vLLM as token ids (``{"prompt_token_ids": [...]}``), the way NeMo-RL's vLLM worker
  passes them (``nemo_rl/models/generation/vllm/utils.py``), so what is scored is exactly what
  our chat rendering tokenized.

vLLM is imported when the generator is built, never at module import: CI (no GPU, no vLLM) imports
this module and tests the parts that need no engine (:func:`request_seed`, :func:`sampling_params`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from nemo_act.common.seeding import key_int
from nemo_act.config.schema import GenerationConfig, ModelConfig, SamplingConfig
from nemo_act.generation.base import ChatModel, GenerationRequest
from nemo_act.generation.hf import check_prompt_length
from nemo_act.rewards import ACTION_CLOSE

STOP = [ACTION_CLOSE]
BATCH_INVARIANT = "VLLM_BATCH_INVARIANT"


def job_batch_invariant(environ: Mapping[str, str]) -> bool:
    """Whether ``VLLM_BATCH_INVARIANT`` in ``environ`` turns vLLM's batch invariance on, read as vLLM reads it.

    vLLM 0.20.0 reads it as ``bool(int(os.getenv("VLLM_BATCH_INVARIANT", "0")))`` (``vllm/envs.py:521``): ``1`` (any
    non-zero integer) is on, ``0`` off, and anything else, ``true`` included, stops vLLM with a ValueError when it
    first reads its settings.

    Raises:
        ValueError: A value vLLM cannot read, in one line that says what to set instead.
    """
    value = environ.get(BATCH_INVARIANT, "0")
    try:
        return bool(int(value))
    except ValueError:
        raise ValueError(
            f"{BATCH_INVARIANT}={value!r} in the environment: vLLM reads it with int() (vllm/envs.py:521) and stops "
            f"with ValueError on {value!r}; unset it and set generation.vllm.batch_invariant=true, which puts "
            f"{BATCH_INVARIANT}=1 in the data steps' engine actors only"
        ) from None


def job_batch_invariant_warning(environ: Mapping[str, str]) -> str | None:
    """What a training stage says when batch invariance is set for the whole job (None when it is not).

    NeMo-RL copies the driver's ``os.environ`` into every worker it starts (``nemo_rl/distributed/worker_groups.py:
    444-447``, v0.7.0), so the policy's training workers and its GRPO rollout engines run vLLM's batch-invariant
    path too (NCCL on one channel, no split-K, no custom all-reduce, a slower FP8 path) on every step.

    Raises:
        ValueError: A value vLLM cannot read (:func:`job_batch_invariant`).
    """
    if not job_batch_invariant(environ):
        return None
    return (
        f"warning: {BATCH_INVARIANT}={environ[BATCH_INVARIANT]} is set for the whole job: NeMo-RL copies it into "
        "every training worker and rollout engine, which then run vLLM's slower batch-invariant kernels; unset it and "
        "set generation.vllm.batch_invariant=true for the data steps' engines only"
    )


def request_seed(seed: int, key: str) -> int:
    """A request's own sampling seed: stable across batches, resumes and processes."""
    return key_int(seed, key, bytes_=4)


def executor(tensor_parallel: int) -> str | None:
    """The ``distributed_executor_backend`` vLLM gets in this process.

    In an engine of an :class:`~nemo_act.generation.ray_pool.EnginePool` over several GPUs
    (:func:`~nemo_act.generation.engine_placement` set ``VLLM_RAY_BUNDLE_INDICES``): ``ray``, its workers on the
    engine's one-GPU bundles, after dropping the actor's ``CUDA_VISIBLE_DEVICES`` as NeMo-RL's worker does
    (``vllm_worker.py:277-293``). Elsewhere None: vLLM's own choice (``vllm/config/parallel.py:794-839``: ``uni`` on
    one GPU, ``mp`` over several outside a placement group).
    """
    if tensor_parallel > 1 and os.environ.get("VLLM_RAY_BUNDLE_INDICES"):
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        return "ray"
    return None


def sampling_params(sampling: SamplingConfig, n: int, seed: int, key: str) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one request."""
    return {
        "n": n,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p if sampling.temperature > 0 else 1.0,
        "max_tokens": sampling.max_new_tokens,
        "seed": request_seed(seed, key),
        "stop": list(STOP),
        "include_stop_str_in_output": True,
    }


class VLLMGenerator(ChatModel):
    """Sample from an HF checkpoint with vLLM's offline engine.

    Args:
        model_cfg: Which model and how its chat template is called.
        gen_cfg: Batch size and the ``vllm`` engine settings.
        name_or_path: Overrides ``model_cfg.name_or_path`` (e.g. a stage's exported checkpoint).
    """

    seeds_each_request = True  # a SamplingParams seed per request (:func:`request_seed`)

    def __init__(self, model_cfg: ModelConfig, gen_cfg: GenerationConfig, name_or_path: str | None = None):
        try:
            from vllm import LLM  # only on a GPU node
        except ImportError as err:
            raise ImportError(
                "generation.backend=vllm needs vLLM: GPU nodes, e.g. the NeMo-RL container pinned in "
                "conf/engine/_nemo_rl_pin.yaml; on CPU use generation=hf"
            ) from err
        if gen_cfg.vllm is None:
            raise ValueError("generation.backend=vllm needs generation.vllm (compose with generation=vllm)")
        super().__init__(model_cfg, gen_cfg, name_or_path)
        self.llm = LLM(
            model=self.name,
            tensor_parallel_size=gen_cfg.vllm.tensor_parallel,
            distributed_executor_backend=executor(gen_cfg.vllm.tensor_parallel),
            gpu_memory_utilization=gen_cfg.vllm.gpu_memory_utilization,
            max_model_len=model_cfg.max_context_tokens,
            dtype="auto" if model_cfg.dtype == "auto" else model_cfg.dtype,
            seed=0,
            enable_prefix_caching=False,  # prompt_logprobs are wrong with it on (see the module docstring)
        )
        self.tokenizer = self.llm.get_tokenizer()

    def _prompt_ids(self, request: GenerationRequest, max_new_tokens: int) -> list[int]:
        ids = self.tokenizer(self.render(request), add_special_tokens=False)["input_ids"]
        check_prompt_length(request.key, len(ids), self.model_cfg, max_new_tokens)
        return ids

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig, seed: int
    ) -> list[list[str]]:
        """Sample ``n`` responses per request (see :class:`~nemo_act.generation.base.Generator`)."""
        from vllm import SamplingParams

        out: list[list[str]] = []
        for start in range(0, len(requests), self.batch_size):
            batch = list(requests[start : start + self.batch_size])
            prompts = [{"prompt_token_ids": self._prompt_ids(r, sampling.max_new_tokens)} for r in batch]
            params = [SamplingParams(**sampling_params(sampling, n, seed, r.key)) for r in batch]
            results = self.llm.generate(prompts, params, use_tqdm=False)
            out.extend([c.text for c in res.outputs] for res in results)
        return out

    def score(self, requests: Sequence[GenerationRequest], continuations: Sequence[str]) -> list[float]:
        """Log-likelihood of each continuation (end-of-turn token included) after its prompt."""
        from vllm import SamplingParams

        eos = self.tokenizer.eos_token or ""
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
        out: list[float] = []
        for start in range(0, len(requests), self.batch_size):
            end = start + self.batch_size
            batch = list(zip(requests[start:end], continuations[start:end], strict=True))
            prompts, spans = [], []
            for req, cont in batch:
                p = self._prompt_ids(req, 1)
                c = self.tokenizer(cont + eos, add_special_tokens=False)["input_ids"]
                prompts.append({"prompt_token_ids": p + c})
                spans.append((len(p), p + c))
            for res, (begin, ids) in zip(self.llm.generate(prompts, params, use_tqdm=False), spans, strict=True):
                logprobs = res.prompt_logprobs
                out.append(sum(logprobs[i][ids[i]].logprob for i in range(begin, len(ids))))
        return out
