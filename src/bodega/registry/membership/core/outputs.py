"""What the SWIM state machine hands back to whoever drives it."""

from __future__ import annotations

from dataclasses import dataclass

from bodega.registry.membership.core.members import Addr, EventKind, MemberView
from bodega.registry.membership.core.messages import Item, Message


@dataclass(frozen=True)
class Send:
    addr: Addr
    message: Message


@dataclass(frozen=True)
class Event:
    """A change in how this node sees a member (never about itself)."""

    kind: EventKind
    member: MemberView


@dataclass(frozen=True)
class Delivered:
    """A broadcast or direct item that reached this node for the first time."""

    item: Item
    sender: str  # the member whose packet carried it (not necessarily its origin)
    direct: bool


Out = Send | Event | Delivered


@dataclass
class SwimStats:
    """Monotonic counts of what this node did; the shell turns them into metrics."""

    probes: int = 0
    probe_failures: int = 0
    indirect_probes: int = 0
    nacks_sent: int = 0
    suspicions: int = 0  # raised by this node's own failed probes
    deaths: int = 0  # declared by this node's own suspicion timers
    refutations: int = 0
    rejoins: int = 0  # told it was dead, so came back as a new generation
    items_delivered: int = 0


class ItemTooLarge(ValueError):
    """A broadcast or direct item that cannot fit in one packet."""


class UnknownMember(KeyError):
    """A direct send to a member this node has never heard of."""
