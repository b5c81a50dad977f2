"""General-reasoning evaluation of agent checkpoints (MATH-500, GPQA-Diamond): ``nemo-act eval-reasoning``."""
