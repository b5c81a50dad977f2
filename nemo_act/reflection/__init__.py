"""The reflection baselines of the ACT paper (Early Experience, SAND, Agent-R): data builders."""
