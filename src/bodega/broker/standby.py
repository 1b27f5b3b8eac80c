"""Which standbys to start: a pure decision over the cluster view.

A standby is a machine whose ``config.standbys`` names the primaries it stands
by for. It rests stopped (or created, never started) on another worker, and is
started only when a primary's worker is unavailable: membership says that
worker is ``dead`` or has ``left``. A worker that is only ``suspect`` may still
answer, so nothing happens until suspicion ends.

Per primary at most one standby is started, the first by id that rests on a
worker membership holds ``alive``; a primary that already has a started (or
starting) standby needs nothing more, which keeps the decision stable when it is
taken again, by the same broker on the next change or by another broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

UNAVAILABLE = ("dead", "left")
RESTING = ("created", "stopped")
RUNNING = ("starting", "started")
GONE = ("destroying", "destroyed")


@dataclass(frozen=True)
class Takeover:
    """Start ``standby`` (on ``worker``): ``primary``'s worker is ``primary_worker``,
    which membership says is ``status``."""

    app: str
    standby: str
    worker: str
    primary: str
    primary_worker: str
    status: str

    @property
    def reason(self) -> str:
        return f"worker {self.primary_worker} is {self.status}"


def standbys_to_start(machines: Sequence[Mapping[str, Any]],
                      status_of: Callable[[str], str | None]) -> list[Takeover]:
    """The standbys to start now, given every machine row of the view and each member's
    SWIM status (``None`` for a name membership does not know)."""
    by_id = {str(m.get("id")): m for m in machines}
    standbys_of: dict[str, list[Mapping[str, Any]]] = {}
    for machine in sorted(machines, key=lambda m: str(m.get("id"))):
        config = machine.get("config") or {}
        for primary in config.get("standbys") or []:
            standbys_of.setdefault(str(primary), []).append(machine)
    takeovers: list[Takeover] = []
    for primary_id, standbys in sorted(standbys_of.items()):
        primary = by_id.get(primary_id)
        if primary is None or primary.get("state") in GONE:
            continue  # a primary destroyed on purpose needs no standby
        primary_worker = str(primary.get("worker") or "")
        status = status_of(primary_worker) if primary_worker else None
        if status not in UNAVAILABLE:
            continue
        mine = [s for s in standbys if s.get("app") == primary.get("app")]
        if any(s.get("state") in RUNNING for s in mine):
            continue  # taken over already
        for standby in mine:
            worker = str(standby.get("worker") or "")
            if standby.get("state") in RESTING and worker and status_of(worker) == "alive":
                takeovers.append(Takeover(
                    app=str(standby.get("app")), standby=str(standby.get("id")), worker=worker,
                    primary=primary_id, primary_worker=primary_worker, status=str(status)))
                break
    return takeovers
