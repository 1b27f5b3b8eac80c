"""Which cached images to drop to fit the cache's size budget; pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class CachedImage:
    """An image the store holds, as eviction weighs it."""

    digest: str  # the manifest's
    size: int  # bytes of its blobs and its base
    last_used: float


def to_evict(cached: Iterable[CachedImage], in_use: set[str], budget_bytes: int) -> list[str]:
    """Least recently used images no machine uses, until the rest fit in ``budget_bytes``.

    Images in use are never dropped, even if they alone exceed the budget.
    """
    images = sorted(cached, key=lambda image: image.last_used)  # oldest first
    total = sum(image.size for image in images)
    evict: list[str] = []
    for image in images:
        if total <= budget_bytes:
            break
        if image.digest in in_use:
            continue
        evict.append(image.digest)
        total -= image.size
    return evict
