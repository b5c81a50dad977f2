"""Cluster engine on NeMo-RL (Ray) + Megatron-Core + vLLM.

Layering, so that what CI can run is most of it:

* ``processors`` (engine-free): stage rows of :mod:`nemo_act.stage_data` (the core's prompts) ->
  NeMo-RL ``DatumSpec`` / ``PreferenceDatumSpec``-shaped dicts with token ids from the model's own
  chat template.
* ``reward_env`` (engine-free): the ACT selection and RL action rewards as batched environments
  with NeMo-RL's ``EnvironmentInterface.step`` signature, returning each reward part as a column of
  a ``[B, 3]`` tensor (NeMo-RL v0.7.0 sums the columns into the total and logs each one).

The NeMo-RL-facing layer (the ``EnvironmentInterface`` subclasses registered in NeMo-RL's actor
environment registry, the GRPO/SFT/DPO drivers, recipes and Slurm launchers) is issue #4's
remaining work; NeMo-RL is pinned once in ``conf/engine/_nemo_rl_pin.yaml``.
"""
