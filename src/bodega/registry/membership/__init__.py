"""Membership: who is alive, by SWIM with Lifeguard (Corrosion's and memberlist's role).

``Swim`` is the pure state machine (``core/``: ``swim.py`` and the modules it is built
from); ``Membership`` runs it on a real UDP endpoint (``udp.py``). Its packets are sealed
by ``registry/sealing``; the simulated network that drives many ``Swim`` nodes is
``bodega.sim.swim``.
"""

from bodega.registry.membership.core.config import MembershipConfig, SwimConfig, parse_seed
from bodega.registry.membership.core.members import Addr, EventKind, MemberView, Role, Status
from bodega.registry.membership.core.messages import Item
from bodega.registry.membership.core.outputs import (
    Delivered,
    Event,
    ItemTooLarge,
    Out,
    Send,
    UnknownMember,
)
from bodega.registry.membership.core.swim import Swim
from bodega.registry.membership.udp import Membership

__all__ = [
    "Addr",
    "Delivered",
    "Event",
    "EventKind",
    "Item",
    "ItemTooLarge",
    "MemberView",
    "Membership",
    "MembershipConfig",
    "Out",
    "Role",
    "Send",
    "Status",
    "Swim",
    "SwimConfig",
    "UnknownMember",
    "parse_seed",
]
