"""Outstanding requests per machine, and since when each has been idle."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol


class Load:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.outstanding: dict[str, int] = {}
        self.idle_since: dict[str, float] = {}

    def begin(self, machine_id: str) -> None:
        self.outstanding[machine_id] = self.outstanding.get(machine_id, 0) + 1
        self.idle_since.pop(machine_id, None)

    def end(self, machine_id: str) -> None:
        left = self.outstanding.get(machine_id, 1) - 1
        if left <= 0:
            self.outstanding.pop(machine_id, None)
            self.idle_since[machine_id] = self.clock()
        else:
            self.outstanding[machine_id] = left

    def seen(self, machine_id: str) -> None:
        """A machine the proxy just learned of counts as idle from now, not from forever."""
        if machine_id not in self.outstanding:
            self.idle_since.setdefault(machine_id, self.clock())

    def woke(self, machine_id: str) -> None:
        """A machine just started: it gets a full idle period before it may be stopped."""
        if machine_id not in self.outstanding:
            self.idle_since[machine_id] = self.clock()


class LoadView(Protocol):
    """What autostop reads: a ``Load``, or several combined (HAProxy's counters and ours)."""

    @property
    def outstanding(self) -> Mapping[str, int]: ...

    @property
    def idle_since(self) -> Mapping[str, float]: ...

    def seen(self, machine_id: str) -> None: ...
