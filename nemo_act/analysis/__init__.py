"""Analyses of trained checkpoints (the paper's rationale intervention): ``nemo-act analyze``."""
