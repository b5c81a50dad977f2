"""A scripted policy for the reflection-baseline tests (a helper module, not a test file).

Alternative-sampling requests are answered by the real random policy (uniform over the admissible list).
Reflection requests (key ``<state>#reflection``) get one of five written answers, chosen by a hash of the
state id, so a test knows which filter each state must hit: a clean reflection, one concluding on another
action, one saying "expert", one naming candidates by number, one repeating the expert's outcome. The
outcome text is read back from the prompt (the line that starts with ``- After "<expert action>":``).

SAND's requests are scripted the same way: a critique (key ``<state>#critique<j>``) quotes what the env
showed right after its candidate; a deliberation (key ``<state>#deliberation``) gets the answer of its
state's kind, the narrating one repeating the expert candidate's critique (and so its outcome).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

from nemo_act.generation.simple import RandomGenerator

KINDS = ("kept", "concludes_other", "says_expert", "candidate_label", "narrates_outcome")


def kind_of(state_id: str) -> str:
    """Which answer a state's reflection request gets."""
    return KINDS[hashlib.sha256(state_id.encode()).digest()[0] % len(KINDS)]


def _outcome(prompt: str, action: str) -> str:
    marker = f'- After "{action}": '
    for line in prompt.splitlines():
        if line.startswith(marker):
            return line[len(marker) :]
    raise AssertionError(f"no outcome line for {action!r} in the prompt")


def _first_outcome(prompt: str) -> str:
    for line in prompt.splitlines():
        if line.startswith('- After "'):
            return line.split('": ', 1)[1]
    raise AssertionError("no outcome line in the critique prompt")


def _critique(prompt: str, action: str) -> str:
    marker = f'- "{action}": '
    for line in prompt.splitlines():
        if line.startswith(marker):
            return line[len(marker) :]
    raise AssertionError(f"no critique line for {action!r} in the prompt")


class ScriptedPolicy:
    """Random alternatives, scripted reflections (``delay`` seconds per reflection call: kill tests)."""

    name = "scripted"

    def __init__(self, delay: float = 0.0) -> None:
        self.random = RandomGenerator()
        self.delay = delay
        self.reflection_calls = 0
        self.critique_calls = 0

    def generate(self, requests: Sequence, n: int, sampling, seed: int) -> list[list[str]]:
        if requests and "#critique" in requests[0].key:
            self.critique_calls += 1
            return [[f"It led to: {_first_outcome(r.messages[-1]['content'])}"] * n for r in requests]
        if not requests or not requests[0].key.endswith(("#reflection", "#deliberation")):
            return self.random.generate(requests, n, sampling, seed)
        self.reflection_calls += 1
        time.sleep(self.delay)
        out = []
        for req in requests:
            sid, expert = req.key.rpartition("#")[0], req.gold_action
            prompt = req.messages[-1]["content"]
            seen = _outcome(prompt, expert) if req.key.endswith("#reflection") else _critique(prompt, expert)
            text = {
                "kept": "The task still needs the right object in view, and the other moves only circle the room "
                "without changing what I can reach.",
                "concludes_other": "Looking around again tells me nothing new here.",
                "says_expert": "The expert would do this, so I follow the same idea.",
                "candidate_label": "Action 2 changes nothing, so the remaining move is the useful one.",
                "narrates_outcome": "Doing it shows: " + seen,
            }[kind_of(sid)]
            answer = "look around zzz" if kind_of(sid) == "concludes_other" else expert
            out.append([f"{text}\n<action>{answer}</action>"] * n)
        return out
