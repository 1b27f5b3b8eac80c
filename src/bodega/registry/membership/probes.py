"""Probe bookkeeping: whom to probe next, an outstanding probe, a relayed ping.

One probe round (timeouts scaled by local health, ``x (score+1)``)::

    sent ── ping ──▶ target
      │ ack ─────────────────────────────▶ done (health -1)
      ├─ direct_until: ping-req to k relays ──▶ relay pings target
      │                 relay: ack ──▶ forwarded ack ──▶ done
      │                 relay: nothing by 80% of its timeout ──▶ nack
      └─ deadline: no ack ──▶ suspect target;
                   health + (relays - nacks), or +1 with no relays

The indirect phase always gets its full length counted from when the
ping-reqs actually left, so a tick delayed by a busy loop shortens nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from bodega.registry.membership.members import Addr


@dataclass
class Probe:
    target: str
    generation: int
    seq: int
    direct_until: float
    deadline: float
    indirect_window: float
    indirect: bool = False
    relays: int = 0  # nacks we may expect
    nacks: int = 0

    def go_indirect(self, now: float, relays: int, expected_nacks: int) -> None:
        self.indirect = True
        self.relays = expected_nacks
        if relays:
            self.deadline = max(self.deadline, now + self.indirect_window)

    @property
    def health_penalty(self) -> int:
        """Lifeguard: a missing nack means the trouble may be ours, not the target's."""
        return self.relays - self.nacks if self.relays else 1


@dataclass
class Relay:
    """A ping we send on behalf of a requester's ping-req."""

    requester: Addr
    requester_seq: int
    nack_at: float | None
    expires: float


class ProbeOrder:
    """Round-robin over a shuffled member list (SWIM §4.3: bounded time to first probe).

    A new member is inserted at a random position ahead of the cursor, so it is
    probed within this round without biasing the order towards join order.
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._order: list[str] = []
        self._listed: set[str] = set()  # membership tests only: sets iterate unreproducibly
        self._index = 0

    def add(self, name: str) -> None:
        if name in self._listed:
            return
        self._listed.add(name)
        self._order.insert(self._rng.randint(self._index, len(self._order)), name)

    def next(self, live: Callable[[], list[str]], eligible: Callable[[str], bool]) -> str | None:
        """The next eligible name; reshuffles ``live()`` when a round ends."""
        for _ in range(len(self._order) + 2):
            if self._index >= len(self._order):
                self._order = live()
                self._rng.shuffle(self._order)
                self._listed = set(self._order)
                self._index = 0
                if not self._order:
                    return None
            name = self._order[self._index]
            self._index += 1
            if eligible(name):
                return name
        return None
