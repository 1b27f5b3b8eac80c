"""bodega.registry: cluster membership (SWIM with Lifeguard) and the gossip channel on it.

``Membership`` runs one node on UDP; ``Swim`` is its pure state machine and
``SimNet`` drives many of them on a simulated network.
"""

from bodega.registry.config import SwimConfig
from bodega.registry.feed import Feed, FeedLagged
from bodega.registry.members import Addr, EventKind, MemberView, Role, Status
from bodega.registry.membership import Membership, MembershipConfig
from bodega.registry.messages import Item
from bodega.registry.outputs import Delivered, Event, ItemTooLarge, Out, Send, UnknownMember
from bodega.registry.simnet import SimClock, SimNet
from bodega.registry.swim import Swim

__all__ = [
    "Addr",
    "Delivered",
    "Event",
    "EventKind",
    "Feed",
    "FeedLagged",
    "Item",
    "ItemTooLarge",
    "MemberView",
    "Membership",
    "MembershipConfig",
    "Out",
    "Role",
    "Send",
    "SimClock",
    "SimNet",
    "Status",
    "Swim",
    "SwimConfig",
    "UnknownMember",
]
