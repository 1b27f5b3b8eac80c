"""The members screen's content: gossip members as this broker's membership sees them.

Each member's status (alive, suspect, dead, left; ``unknown`` for a worker whose
row is in the view but of which membership has no record) and since when, its
incarnation (how often it has refuted a suspicion of itself) and, while it is
suspect, how long
this broker gives it to refute before declaring it dead (Lifeguard's
suspicion timeout, which shrinks as others confirm). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bodega.broker.ui.core.rows import dom_key, natural

ROLE_ORDER = {"broker": 0, "proxy": 1, "worker": 2}


@dataclass(frozen=True)
class MemberRow:
    name: str
    role: str
    region: str
    addr: str
    status: str
    incarnation: int
    generation: int
    url: str
    suspect_for: float | None  # seconds left to refute a suspicion; None: not suspect
    since: str = ""  # when its status last changed, as this broker saw it

    @property
    def key(self) -> str:
        return dom_key(self.name)


def member_rows(members: Iterable[Mapping[str, Any]],
                suspicion_left: Callable[[str], float | None]) -> list[MemberRow]:
    rows = []
    for m in members:
        name = str(m.get("name", ""))
        status = str(m.get("status", ""))
        meta = m.get("meta") or {}
        left = suspicion_left(name) if status == "suspect" else None
        rows.append(MemberRow(name=name, role=str(m.get("role", "")),
                              region=str(m.get("region", "")), addr=str(m.get("addr", "")),
                              status=status, incarnation=int(m.get("incarnation") or 0),
                              generation=int(m.get("generation") or 0),
                              url=str(meta.get("url", "")) if isinstance(meta, Mapping) else "",
                              suspect_for=None if left is None else max(0.0, left),
                              since=str(m.get("since") or "")))
    return sorted(rows, key=lambda r: (ROLE_ORDER.get(r.role, 9), r.role, natural(r.name)))


def status_counts(rows: Iterable[MemberRow]) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return tuple(sorted(counts.items(), key=lambda kv: (kv[0] != "alive", kv[0])))
