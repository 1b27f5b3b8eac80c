"""A digest of a member table, so a push-pull exchanges only the members that differ.

memberlist's push-pull sends the whole member table, so its cost per node
grows with the cluster. Here the table is kept hashed in the same 64 buckets
as the replica's ledger (``buckets.bucket_of`` of the member's name); a
bucket's digest is the XOR of a 64-bit hash of each member's identity and
state (name, generation, incarnation, status: not who raised a suspicion,
which honest members may disagree on). A push-pull sends the digest (512
bytes); the peer answers with its records in the buckets that differ and
asks for ours in the same buckets. Two members that agree exchange one
packet each way, at any cluster size, and any difference is repaired in one
exchange.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Sequence

from bodega.registry.membership.core.buckets import BUCKETS, Digest, bucket_of
from bodega.registry.membership.core.members import MemberRecord


def record_hash(record: MemberRecord) -> int:
    text = f"{record.name}\x00{record.generation}\x00{record.incarnation}\x00{record.status}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class MemberDigest:
    def __init__(self) -> None:
        self._digest = [0] * BUCKETS
        self._names: list[set[str]] = [set() for _ in range(BUCKETS)]

    def replace(self, old: MemberRecord | None, new: MemberRecord | None) -> None:
        record = new or old
        if record is None:
            return
        bucket = bucket_of(record.name)
        if old is not None:
            self._digest[bucket] ^= record_hash(old)
        if new is not None:
            self._digest[bucket] ^= record_hash(new)
            self._names[bucket].add(new.name)
        else:
            self._names[bucket].discard(record.name)

    def digest(self, local: MemberRecord) -> Digest:
        """The table's digest with the local member's own record in it."""
        out = list(self._digest)
        out[bucket_of(local.name)] ^= record_hash(local)
        return tuple(out)

    def names_in(self, buckets: Sequence[int]) -> Iterator[str]:
        for bucket in sorted(set(buckets)):
            yield from sorted(self._names[bucket])


def pack(digest: Digest) -> str:
    return base64.b64encode(b"".join(d.to_bytes(8, "big") for d in digest)).decode()


def unpack(text: str) -> Digest:
    """ValueError unless ``text`` is BUCKETS 8-byte digests in base64."""
    raw = base64.b64decode(text, validate=True)
    if len(raw) != BUCKETS * 8:
        raise ValueError(f"a digest is {BUCKETS} 8-byte buckets")
    return tuple(int.from_bytes(raw[i:i + 8], "big") for i in range(0, len(raw), 8))
