"""The recent mix of machine shapes a region is asked for, kept by each broker on its own.

Fragmentation only means something against the shapes that arrive: eight
free cpus in crumbs of two strand nothing if every machine wants one cpu,
and strand everything if the next one wants eight. Each broker notes the
shape (cpu kind, cpus, memory) of every create it is asked for, placed or
not, in the region's ``ShapeMix``, and whether it found no worker
(``missed``). A create counts ``1`` and every older one decays by
``1 - 1/memory`` per create, so the mix follows the last few ``memory``
creates (a broker that sees a third of the traffic sees the same mix, a
third as often). No central state: three brokers hold three close estimates
of the same mix, each from the creates it was asked for.

Decay by count, not by time, keeps the mix a pure function of the creates
seen. A note costs O(1): instead of decaying every weight, each new one is
added with a growing scale, folded back into the weights now and then.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bodega.model.capacity import Ask

MEMORY = 2000  # creates: a create's weight halves after about 0.7 * MEMORY more
LIMIT = 32  # distinct shapes kept; the rarest is forgotten first (never the newest)
_RESCALE = 1e100  # the scale is folded back into the weights past this
_GROWTH_LIMIT = 1e50  # memory 1: only the last create counts

Shape = tuple[bool, int, int]  # (dedicated cpus, cpus, memory MB)


@dataclass(frozen=True)
class Shapes:
    """The mix as columns: whether each shape wants dedicated cpus, its cpus, its memory
    (MB) and its share of recent creates (the shares sum to 1)."""

    performance: npt.NDArray[np.bool_]
    cpus: npt.NDArray[np.float64]
    memory_mb: npt.NDArray[np.float64]
    share: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.share)


class ShapeMix:
    def __init__(self, memory: int = MEMORY, limit: int = LIMIT) -> None:
        if memory < 1 or limit < 1:
            raise ValueError("a shape mix needs a memory and a limit of at least 1")
        self.memory, self.limit = memory, limit
        self.version = 0  # bumped at every note, so derived figures know when to redo
        self._weights: dict[Shape, float] = {}
        self._missed = 0.0
        self._scale = 1.0
        self._growth = 1.0 / (1.0 - 1.0 / memory) if memory > 1 else _GROWTH_LIMIT
        self._columns: Shapes | None = None

    def note(self, ask: Ask) -> None:
        """A create asked for ``ask``; machines with GPUs are left out (a pool of their own)."""
        if ask.gpus or ask.cpus <= 0:
            return
        key = (ask.cpu_kind == "performance", ask.cpus, ask.memory_mb)
        self._weights[key] = self._weights.get(key, 0.0) + self._scale
        self._scale *= self._growth
        if self._scale > _RESCALE:
            self._rescale()
        if len(self._weights) > self.limit:  # forget the rarest other than this one, which
            # would otherwise never get in once the mix is full of more frequent shapes
            rarest = min((k for k in self._weights if k != key), key=self._weights.__getitem__)
            del self._weights[rarest]
        self._columns = None
        self.version += 1

    def missed(self) -> None:
        """The create last noted found no worker to take it."""
        if self._weights:
            self._missed += self._scale / self._growth
            self.version += 1

    @property
    def missed_share(self) -> float:
        """The share of recent creates that found no worker (decayed as the mix is)."""
        total = sum(self._weights.values())
        return min(1.0, self._missed / total) if total else 0.0

    def _rescale(self) -> None:
        scale = self._scale
        self._weights = {k: w / scale for k, w in self._weights.items() if w / scale > 1e-300}
        self._missed /= scale
        self._scale = 1.0

    def shares(self) -> dict[Shape, float]:
        """(dedicated cpus, cpus, memory MB) -> share of recent creates."""
        total = sum(self._weights.values())
        return {k: w / total for k, w in self._weights.items()} if total else {}

    def columns(self) -> Shapes:
        if self._columns is None:
            shares = self.shares()
            keys = list(shares)
            self._columns = Shapes(
                np.array([k[0] for k in keys], dtype=np.bool_),
                np.array([k[1] for k in keys], dtype=np.float64),
                np.array([k[2] for k in keys], dtype=np.float64),
                np.array([shares[k] for k in keys], dtype=np.float64))
        return self._columns
