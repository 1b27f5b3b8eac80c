"""Failpoints: kill this process with SIGKILL at a chosen step, to prove crash safety.

A failpoint is ``<fsm>:<step>:<when>`` where ``when`` is ``before`` (the step
is recorded, its effect has not run) or ``after`` (the effect ran, the next
step is not yet recorded). The crash tests start a real worker with one
failpoint, drive the operation into it, and restart the worker without it.
Production daemons are started with none.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass

log = logging.getLogger("bodega.failpoints")


@dataclass(frozen=True)
class Failpoints:
    points: frozenset[tuple[str, str, str]] = frozenset()

    @classmethod
    def parse(cls, spec: str | None) -> Failpoints:
        if not spec:
            return cls()
        points = set()
        for item in spec.split(","):
            parts = item.strip().split(":")
            if len(parts) != 3 or parts[2] not in ("before", "after"):
                raise ValueError(f"bad failpoint {item!r}: use fsm:step:before|after")
            points.add((parts[0], parts[1], parts[2]))
        return cls(frozenset(points))

    def hit(self, fsm: str, step: str, when: str) -> None:
        if (fsm, step, when) in self.points:
            log.warning("failpoint %s:%s:%s reached: killing this process", fsm, step, when)
            os.kill(os.getpid(), signal.SIGKILL)
