"""The 64 buckets both digests are kept in: origins' seen versions and the member table.

Every name (an origin of rows, a member) falls in one of ``BUCKETS`` buckets
by a CRC-32 of the name, the same on every node. Each bucket has a 64-bit
digest; two nodes compare their ``BUCKETS`` digests (512 bytes) and exchange
only what lies in the buckets that differ, so a comparison costs the same at
50 nodes as at 5,000. Replication's ledger (``ledger.py``) and membership's
push-pull (``memberdigest.py``) both use these buckets; this module is the
one thing they share.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

BUCKETS = 64
Digest = tuple[int, ...]  # BUCKETS unsigned 64-bit integers


def bucket_of(name: str) -> int:
    return zlib.crc32(name.encode()) % BUCKETS


def differing(mine: Sequence[int], theirs: Sequence[int]) -> list[int]:
    """The buckets whose digests differ (all of them if the sizes disagree)."""
    if len(mine) != len(theirs):
        return list(range(BUCKETS))
    return [i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b]
