"""The data steps before training.

Expert collection (``experts``), ACT pair construction (``pairs``), env branching for the baselines (``branching``).
"""
