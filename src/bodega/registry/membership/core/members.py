"""What a node knows about one member, and which of two claims about it wins.

A member's identity is its ``name``. Each process start of that member is a
new *generation* (persisted by the member itself, +1 per start); within a
generation the member's *incarnation* orders claims about it, and only the
member raises its own incarnation (to refute a suspicion or to announce new
metadata). Precedence, SWIM §4.2 as memberlist and Foca apply it:

    higher generation               wins over anything of a lower one
    dead / left (same generation)   final: nothing revives it; a restart is
                                    a new generation
    alive(i)   over alive(j) / suspect(j)   iff i > j
    suspect(i) over alive(j) iff i >= j,  over suspect(j) iff i > j
    left       over dead (the member said goodbye; both are final)

Statuses as a member's life looks from outside:

    alive ──▶ suspect ──▶ dead
      ▲          │
      └──────────┘ (refuted: alive with a higher incarnation)
    alive / suspect ──▶ left           (graceful leave)
    dead / left ──▶ alive (generation + 1: the member restarted)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from enum import StrEnum

from bodega.model.json import JsonObject

Addr = tuple[str, int]

MAX_NAME = 64
MAX_REGION = 32
MAX_HOST = 253
MAX_META_BYTES = 512  # keeps every record well inside one UDP packet
# A hosted member's agent, as its record travels: a metadata key, which members of any
# version carry along (``messages.py``). Reserved: no daemon's metadata may use it.
HOST_META = "_via"


class Role(StrEnum):
    WORKER = "worker"
    BROKER = "broker"
    PROXY = "proxy"
    AGENT = "agent"  # a host's registry agent


class Status(StrEnum):
    ALIVE = "alive"
    SUSPECT = "suspect"
    DEAD = "dead"
    LEFT = "left"

    @property
    def live(self) -> bool:
        return self is Status.ALIVE or self is Status.SUSPECT


@dataclass(frozen=True)
class MemberRecord:
    """One claim about a member: what gossip carries and what a node stores.

    ``by`` names the member that raised a suspicion or declared a death, so
    independent confirmations can be counted; it is empty for alive claims.
    ``host`` names the registry agent that speaks for the member (a *hosted*
    member: a process of the agent's host, which runs no SWIM of its own); it
    is empty for a member that speaks for itself. Only its agent raises a
    hosted member's incarnation or declares it suspect or dead, and no one
    probes it: it is as live as its agent says, and dead when its agent is.
    """

    name: str
    addr: Addr
    role: Role
    region: str
    meta: dict[str, str] = field(default_factory=dict)
    incarnation: int = 0
    generation: int = 1
    status: Status = Status.ALIVE
    by: str = ""
    host: str = ""

    def __post_init__(self) -> None:
        if HOST_META in self.meta:
            raise ValueError(f"member metadata may not use the reserved key {HOST_META!r}")
        # Bounded as it travels, with its agent's name among the metadata.
        check_identity(self.name, self.addr, self.region, self.wire_meta)
        if not _plain(self.by, MAX_NAME):
            raise ValueError("'by' must name a member")
        if not _plain(self.host, MAX_NAME) or self.host == self.name:
            raise ValueError("'host' must name another member")

    @property
    def wire_meta(self) -> dict[str, str]:
        """The metadata as the record travels: a hosted member's carries its agent."""
        return {**self.meta, HOST_META: self.host} if self.host else self.meta

    def with_status(self, status: Status, by: str = "") -> MemberRecord:
        return replace(self, status=status, by=by)

    def same_profile(self, other: MemberRecord) -> bool:
        """Same address and metadata: nothing a listing would show has changed."""
        return (self.addr, self.role, self.region, self.meta, self.host) == (
            other.addr, other.role, other.region, other.meta, other.host)


@dataclass(frozen=True)
class MemberView:
    """A member as listings show it."""

    name: str
    addr: Addr
    role: Role
    region: str
    meta: dict[str, str]
    status: Status
    incarnation: int
    generation: int
    host: str = ""  # the agent that speaks for it; empty: it speaks for itself

    @classmethod
    def of(cls, record: MemberRecord) -> MemberView:
        return cls(record.name, record.addr, record.role, record.region, dict(record.meta),
                   record.status, record.incarnation, record.generation, record.host)

    def to_json(self) -> JsonObject:
        return {"name": self.name, "addr": f"{self.addr[0]}:{self.addr[1]}",
                "role": str(self.role), "region": self.region, "meta": self.meta,
                "status": str(self.status), "incarnation": self.incarnation,
                "generation": self.generation, "host": self.host}


def _plain(text: str, most: int) -> bool:
    # Printable ASCII only: JSON escapes anything else to up to 12 bytes a
    # character, and the bounds here are what keep a record inside a packet.
    return len(text) <= most and text.isascii() and text.isprintable()


def check_identity(name: str, addr: Addr, region: str, meta: dict[str, str]) -> None:
    """Bounds every member must respect, so a record always fits a packet."""
    if not name or not _plain(name, MAX_NAME):
        raise ValueError(f"member name must be 1..{MAX_NAME} printable ASCII characters")
    host, port = addr
    if not host or not _plain(host, MAX_HOST) or not 0 <= port <= 65535:
        raise ValueError(f"bad member address {addr!r}")
    if not _plain(region, MAX_REGION):
        raise ValueError(f"region must be at most {MAX_REGION} printable ASCII characters")
    if not meta:
        return
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError("member metadata maps strings to strings")
    if len(json.dumps(meta, separators=(",", ":"))) > MAX_META_BYTES:
        raise ValueError(f"member metadata must encode to at most {MAX_META_BYTES} bytes")


def supersedes(new: MemberRecord, old: MemberRecord) -> bool:
    """Whether ``new`` replaces ``old`` (both about the same member)."""
    if new.generation != old.generation:
        return new.generation > old.generation
    if not old.status.live:
        return new.status is Status.LEFT and old.status is Status.DEAD
    if new.status is Status.ALIVE:
        return new.incarnation > old.incarnation
    if new.status is Status.SUSPECT:
        if old.status is Status.ALIVE:
            return new.incarnation >= old.incarnation
        return new.incarnation > old.incarnation
    return True  # dead or left


class EventKind(StrEnum):
    JOINED = "joined"  # first seen, or back as a new generation
    ALIVE = "alive"  # a suspicion was refuted
    SUSPECT = "suspect"
    DEAD = "dead"
    LEFT = "left"
    META_UPDATED = "meta_updated"  # same generation, new address or metadata


def change_kind(old: MemberRecord | None, new: MemberRecord) -> EventKind | None:
    """The event a listener should see when ``new`` replaces ``old``; None if invisible."""
    if new.status is Status.DEAD:
        return EventKind.DEAD
    if new.status is Status.LEFT:
        return EventKind.LEFT
    if old is None or new.generation != old.generation or not old.status.live:
        return EventKind.JOINED
    if new.status is Status.SUSPECT:
        return EventKind.SUSPECT if old.status is Status.ALIVE else None
    if old.status is Status.SUSPECT:
        return EventKind.ALIVE
    return None if new.same_profile(old) else EventKind.META_UPDATED
