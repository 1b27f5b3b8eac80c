"""Which versions of each origin a replica has seen, kept with a digest peers compare first.

Beside the seen versions, the ledger keeps each origin's *horizon*: the
highest version whose tombstone this replica purged (or a peer it copied
from did), below which a requester may have missed a delete (see
``replica.py``, reset).

Anti-entropy used to send the whole version vector (one entry per origin) on
every pull: the request, and the work to answer it, grew with the fleet.
Instead every origin falls in one of ``BUCKETS`` buckets (``buckets.py``: a
CRC of its name, the same on every node), and each bucket has a 64-bit
digest: the XOR of a hash of each of its origins' seen versions (``Known``).
A pull first sends the ``BUCKETS`` digests, a constant 512 bytes; the peer
names the buckets whose digests differ from its own, and only then do the
two exchange versions, and rows, for the origins of those buckets. Two replicas that hold
the same versions exchange nothing more; idle, a pull costs the same at 50
nodes as at 5,000.

XOR makes the digest incremental: a change to one origin's versions updates
one bucket in O(1), so no step of the replica does per-origin work, and
``missing`` (origins with gaps) is kept the same way. An origin without a
seen version (``EMPTY``) is absent: it hashes to nothing.

Changes made inside ``journal()`` (seen versions and horizons) are undone if
it raises, so what a replica believes it holds rolls back with the view
transaction that failed to store it, without copying the ledger on every
transaction: believing it anyway would make the replica vouch for rows it
never stored and stop asking for them, and it would never converge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from bodega.registry.membership.core.buckets import BUCKETS, Digest, bucket_of
from bodega.registry.replication.core.known import EMPTY, Known


def origin_hash(origin: str, known: Known) -> int:
    """A 64-bit hash of what is seen of ``origin``; 0 for nothing seen."""
    if known == EMPTY:
        return 0
    text = f"{origin}\x00{known.top}\x00{known.gaps}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


class Ledger:
    def __init__(self, local: str, saved: dict[str, Known] | None = None,
                 horizons: dict[str, int] | None = None) -> None:
        self.local = local
        self._known: dict[str, Known] = {}
        self._missing: dict[str, int] = {}  # origins (not local) with gaps: how many versions
        self._digest = [0] * BUCKETS
        self._origins: list[set[str]] = [set() for _ in range(BUCKETS)]
        self._horizons = {origin: purged for origin, purged in (horizons or {}).items() if purged}
        self._undo: dict[str, Known] | None = None
        self._undo_horizons: dict[str, int] = {}
        for origin, known in (saved or {}).items():
            self.set(origin, known)

    def __contains__(self, origin: str) -> bool:
        return origin in self._known

    def __len__(self) -> int:
        return len(self._known)

    def get(self, origin: str) -> Known:
        return self._known.get(origin, EMPTY)

    def items(self) -> Iterable[tuple[str, Known]]:
        return self._known.items()

    def copy(self) -> dict[str, Known]:
        return dict(self._known)

    def missing(self) -> dict[str, int]:
        return dict(self._missing)

    @property
    def behind(self) -> bool:
        return bool(self._missing)

    def digest(self) -> Digest:
        return tuple(self._digest)

    def origins_in(self, buckets: Iterable[int]) -> Iterator[str]:
        for bucket in sorted(set(buckets)):
            if 0 <= bucket < BUCKETS:
                yield from sorted(self._origins[bucket])

    def set(self, origin: str, known: Known) -> None:
        old = self._known.get(origin, EMPTY)
        if old == known:
            return
        if self._undo is not None and origin not in self._undo:
            self._undo[origin] = old
        bucket = bucket_of(origin)
        self._digest[bucket] ^= origin_hash(origin, old) ^ origin_hash(origin, known)
        if known == EMPTY:
            self._known.pop(origin, None)
            self._origins[bucket].discard(origin)
        else:
            self._known[origin] = known
            self._origins[bucket].add(origin)
        gaps = known.missing if origin != self.local else 0
        if gaps:
            self._missing[origin] = gaps
        else:
            self._missing.pop(origin, None)

    def horizon(self, origin: str) -> int:
        """The highest version of ``origin`` whose tombstone was purged (0: none)."""
        return self._horizons.get(origin, 0)

    def raise_horizon(self, origin: str, purged: int) -> bool:
        """Versions up to ``purged`` are purged now; False if the horizon was already there."""
        old = self._horizons.get(origin, 0)
        if purged <= old:
            return False
        if self._undo is not None:
            self._undo_horizons.setdefault(origin, old)
        self._horizons[origin] = purged
        return True

    @contextmanager
    def journal(self) -> Iterator[None]:
        """Undo every ``set`` and ``raise_horizon`` made inside if the block raises."""
        outer = self._undo
        self._undo = {} if outer is None else outer
        if outer is None:
            self._undo_horizons = {}
        try:
            yield
        except BaseException:
            if outer is None:
                undo, self._undo = self._undo, None
                for origin, known in undo.items():
                    self.set(origin, known)
                for origin, purged in self._undo_horizons.items():
                    if purged:
                        self._horizons[origin] = purged
                    else:
                        self._horizons.pop(origin, None)
            raise
        finally:
            if outer is None:
                self._undo = None
