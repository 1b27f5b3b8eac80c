"""Which cached images to drop to fit the cache's size budget; pure."""

from __future__ import annotations

from collections.abc import Iterable

from bodega.worker.images.store import CachedImage


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
