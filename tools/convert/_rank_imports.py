"""What every converter rank imports on CPU, imported once by the forkserver the ranks are forked from.

``_megatron.launch`` names this module as the forkserver's preload (CPU only): Megatron-Core, Megatron-Bridge
(through :func:`cpu_shims.import_bridge_without_te`, exactly as a rank imports it: with a real Transformer Engine
where one is installed, with the import-time placeholder where not) and our Olmo bridges. Nothing here touches a
device or starts a thread; the CPU shims that patch ``torch.cuda`` are applied by each rank, not here.
"""

import cpu_shims

cpu_shims.import_bridge_without_te()

import olmo3_bridge  # noqa: E402, F401  (registers the Olmo bridges)
import transformers  # noqa: E402, F401
