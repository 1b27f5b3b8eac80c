"""How a registry agent judges the processes of its host it speaks for (its *tenants*).

A tenant runs no SWIM of its own: it checks in with its agent on the host's
local socket about once a second, and the agent gossips a record for it
(``MemberRecord.host``). Nobody probes a tenant, so silence is the agent's
evidence: a tenant not heard from for ``suspect_after`` seconds is suspect,
and dead once ``dead_after`` seconds have passed since it was last heard.
Pure: the caller passes the time and applies the verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bodega.registry.membership.core.members import Status


@dataclass
class _Tenant:
    heard: float
    status: Status


class Tenants:
    def __init__(self, suspect_after: float, dead_after: float) -> None:
        if not 0 < suspect_after < dead_after:
            raise ValueError("a tenant is suspect before it is dead: 0 < suspect_after < "
                             "dead_after")
        self.suspect_after = suspect_after
        self.dead_after = dead_after
        self._tenants: dict[str, _Tenant] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._tenants

    def heard(self, now: float, name: str) -> None:
        """``name`` checked in: alive from now."""
        self._tenants[name] = _Tenant(now, Status.ALIVE)

    def forget(self, name: str) -> None:
        """``name`` left, or a verdict of its death was given."""
        self._tenants.pop(name, None)

    def postpone(self, seconds: float) -> None:
        """The judge was away ``seconds`` (its loop stalled): check-ins sent meanwhile are
        still unread, so that much silence counts against no one."""
        if seconds > 0:
            for tenant in self._tenants.values():
                tenant.heard += seconds

    def due(self, now: float) -> list[tuple[str, Status]]:
        """Verdicts whose time has come: each tenant silent long enough, and what it now is.
        A dead tenant is forgotten; it is judged again once it checks in."""
        verdicts = []
        for name, tenant in list(self._tenants.items()):
            silent = now - tenant.heard
            if silent >= self.dead_after:
                verdicts.append((name, Status.DEAD))
                del self._tenants[name]
            elif silent >= self.suspect_after and tenant.status is Status.ALIVE:
                tenant.status = Status.SUSPECT
                verdicts.append((name, Status.SUSPECT))
        return verdicts

    def next_due(self) -> float:
        """When ``due`` next has a verdict to give (inf: no tenant)."""
        return min((t.heard + (self.suspect_after if t.status is Status.ALIVE
                               else self.dead_after) for t in self._tenants.values()),
                   default=math.inf)
