"""Which worker is a job's home: rendezvous (highest random weight) hashing over the workers.

Every broker computes the same order from the same set of live workers, with
no coordination: a job's home is the first of ``rendezvous(key, workers)``.
When a worker leaves, only the jobs whose home it was move to their second
choice; the others keep theirs. The key is the job's app and name (a name
left out is made from the idempotency key), so the name's uniqueness and the
key's check are both decided in the one transaction that commits the job,
and a status or cancel by name finds the home without the view. A retry
that changes the name is routed by the broker's view of the key instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def weight(key: str, worker: str) -> int:
    digest = hashlib.blake2b(f"{key}\0{worker}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous(key: str, workers: Iterable[str]) -> list[str]:
    """``workers`` from the most to the least preferred home for ``key``."""
    return sorted(set(workers), key=lambda worker: (-weight(key, worker), worker))


def job_key(app: str, name: str) -> str:
    return f"{app}/{name}"
