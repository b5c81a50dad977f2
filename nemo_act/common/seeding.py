"""Seeds from keys: one place that turns (seed, key, ...) into a reproducible number or RNG.

Sampling, candidate order and coin flips are seeded per item (a state, a pair, a request) rather than per
run, so a resumed or re-batched job draws exactly what an uninterrupted one would. Every such seed is
SHA-256 of the parts joined by NUL bytes.
"""

from __future__ import annotations

import hashlib
import random


def key_digest(*parts: object) -> bytes:
    """SHA-256 of the parts (``str`` of each) joined by NUL bytes."""
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()


def key_int(*parts: object, bytes_: int = 8) -> int:
    """A non-negative integer from the first ``bytes_`` bytes of :func:`key_digest`."""
    return int.from_bytes(key_digest(*parts)[:bytes_], "big")


def key_rng(*parts: object) -> random.Random:
    """A :class:`random.Random` seeded from the parts."""
    return random.Random(key_int(*parts))
