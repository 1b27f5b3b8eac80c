"""bodega.registry: the cluster view every daemon embeds (Corrosion's role).

``RegistryNode`` is the one object a daemon uses: SWIM membership with
Lifeguard (``Membership``), a SQLite replica of the replicated tables read
locally (``get``, ``rows``), writes of owned and shared rows that spread by
gossip and anti-entropy, and subscriptions (``RowChange`` streams).
``Swim`` and the replication core are pure state machines; ``SimNet`` and
``ReplicaNet`` drive many of them on a simulated network.
"""

from bodega.registry.client import subscribe_http
from bodega.registry.config import SwimConfig
from bodega.registry.feed import Feed, FeedLagged
from bodega.registry.members import Addr, EventKind, MemberView, Role, Status
from bodega.registry.membership import Membership, MembershipConfig
from bodega.registry.messages import Item
from bodega.registry.node import RegistryConfig, RegistryNode
from bodega.registry.outputs import Delivered, Event, ItemTooLarge, Out, Send, UnknownMember
from bodega.registry.replica import InvalidRow
from bodega.registry.replsim import ReplicaNet
from bodega.registry.simnet import SimClock, SimNet
from bodega.registry.subscriptions import RowChange, Subscription
from bodega.registry.swim import Swim

__all__ = [
    "Addr",
    "Delivered",
    "Event",
    "EventKind",
    "Feed",
    "FeedLagged",
    "InvalidRow",
    "Item",
    "ItemTooLarge",
    "MemberView",
    "Membership",
    "MembershipConfig",
    "Out",
    "RegistryConfig",
    "RegistryNode",
    "ReplicaNet",
    "Role",
    "RowChange",
    "Send",
    "SimClock",
    "SimNet",
    "Status",
    "Subscription",
    "Swim",
    "SwimConfig",
    "UnknownMember",
    "subscribe_http",
]
