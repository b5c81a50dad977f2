"""NeMo-RL-facing reward environments: thin ``EnvironmentInterface`` actors over :mod:`.reward_env`.

Importing this module needs NeMo-RL (its release container or a checkout of the pinned tag, see
``conf/engine/_nemo_rl_pin.yaml``). :func:`register` puts both environments in NeMo-RL's two
registries: ``ENV_REGISTRY`` (name -> actor class path, what ``create_env`` looks up) and
``ACTOR_ENVIRONMENT_REGISTRY`` (class path -> Python executable; ours need nothing beyond the
system one). Config of each actor: ``{"values": rewards.<part>, "use_admissible": bool, "log_path": str|None,
"first_step": int, "stage": str, "zero_variance_steps": int}`` (``first_step``: the step a resumed stage
restarts after; the last two: the no-signal warning) (:mod:`.recipe` writes it under ``env.<name>``).
"""

from __future__ import annotations

from typing import Any

import ray  # noqa: TID253
from nemo_rl.distributed.ray_actor_environment_registry import ACTOR_ENVIRONMENT_REGISTRY  # noqa: TID253
from nemo_rl.distributed.virtual_cluster import PY_EXECUTABLES  # noqa: TID253
from nemo_rl.environments.interfaces import EnvironmentInterface, EnvironmentReturn  # noqa: TID253
from nemo_rl.environments.utils import ENV_REGISTRY, register_env  # noqa: TID253

from nemo_act.engines.nemo_rl.reward_env import ScoredRewardEnv  # noqa: TID253
from nemo_act.stage_kinds import REWARD_KINDS


class _RewardEnvironment(EnvironmentInterface):
    """One-turn reward environment over the engine-free :class:`~.reward_env.ScoredRewardEnv`.

    ``reward`` names a shipped reward (set by the subclass); None: the config names it (``reward``, a reward an
    extension registers: the core imports the config's ``extensions`` first).
    """

    reward: str | None = None

    def __init__(self, cfg: dict[str, Any]) -> None:
        self._core = ScoredRewardEnv(
            self.reward or cfg["reward"],
            cfg["values"],
            cfg["use_admissible"],
            cfg.get("log_path"),
            cfg.get("first_step", 0),
            cfg.get("stage", ""),
            cfg.get("zero_variance_steps", 0),
            cfg.get("extensions", ()),
        )

    def step(self, message_log_batch, metadata) -> EnvironmentReturn:
        """Score one turn of a batch: rewards ``[B, 3]`` (accuracy, admissible, format)."""
        return EnvironmentReturn(*self._core.step(message_log_batch, metadata))

    def global_post_process_and_metrics(self, batch):
        """Nothing to add: each reward column is logged by the rollout (GRPO v0.7.0 never calls this)."""
        return batch, {}


@ray.remote(max_restarts=-1, max_task_retries=-1)  # pragma: no cover - runs inside a Ray actor
class ACTSelectionEnvironment(_RewardEnvironment):
    """ACT stage reward: which candidate the response names."""

    reward = "selection"


@ray.remote(max_restarts=-1, max_task_retries=-1)  # pragma: no cover - runs inside a Ray actor
class ACTActionEnvironment(_RewardEnvironment):
    """RL stage reward on directly generated actions."""

    reward = "action"


@ray.remote(max_restarts=-1, max_task_retries=-1)  # pragma: no cover - runs inside a Ray actor
class ACTRewardEnvironment(_RewardEnvironment):
    """A reward registered by an extension (its config names it: ``reward``, and the ``extensions`` to import)."""


# Environment name (the datums' ``task_name``) -> actor class path, for the rewards nemo-act ships.
ENVIRONMENTS = {
    "act_selection": f"{__name__}.ACTSelectionEnvironment",
    "act_action": f"{__name__}.ACTActionEnvironment",
}
GENERIC = f"{__name__}.ACTRewardEnvironment"


def register() -> None:
    """Register our reward environments and data processor with NeMo-RL (idempotent).

    ``tools/convert/autoregister/sitecustomize.py`` calls this in every Python that imports NeMo-RL's
    env registry while our folders are on ``PYTHONPATH``, so NeMo-RL's own ``examples/run_grpo.py``
    finds our environments before it loads any data.
    """
    from nemo_rl.data.processors import PROCESSOR_REGISTRY

    from nemo_act.engines.nemo_rl.processors import PROCESSOR, nemo_act_processor

    # the shipped rewards, and every reward registered in this process (the driver has loaded the config, so its
    # extensions' rewards are there): each under its environment name, a registered one on the generic actor
    every = ENVIRONMENTS | {r.environment: GENERIC for r in REWARD_KINDS.values() if r.environment not in ENVIRONMENTS}
    for name, fqn in every.items():
        ACTOR_ENVIRONMENT_REGISTRY.setdefault(fqn, PY_EXECUTABLES.SYSTEM)
        if name not in ENV_REGISTRY:
            register_env(name, fqn)
    PROCESSOR_REGISTRY.setdefault(PROCESSOR, nemo_act_processor)
