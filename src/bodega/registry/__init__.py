"""bodega.registry: the cluster view every daemon embeds (Corrosion's role).

A daemon holds a ``Registry``: the ``HostedNode`` of its host's registry agent
(``agent/``, one replica per host), or a ``RegistryNode`` of its own (``node.py``): SWIM
membership with Lifeguard (``Membership``), a SQLite replica of the replicated tables read
locally (``get``, ``rows``), writes of owned and shared rows that spread by gossip and
anti-entropy, and subscriptions (``RowChange`` streams).

Rooms by role, each with its pure decisions in a ``core/`` folder: ``membership/`` (``Swim``,
the pure SWIM state machine, and ``Membership``, its UDP shell), ``sealing/`` (the gossip
keyring, sealed packets, key rotation), ``replication/`` (the replica over its SQLite view),
``sync/`` (peer sync: rows on gossip, anti-entropy, the peer routes and their client),
``api/`` (the public API: SQL queries and subscriptions), ``agent/`` (``bodega agent`` and
what a host's processes use of it). The simulators that drive many of them on a simulated
network live beside the placement simulator (``bodega.sim.swim``, ``bodega.sim.replication``).
"""

from bodega.registry.agent.hosted import HostedNode, Registry, open_registry
from bodega.registry.api.subscriptions import RowChange, Subscription
from bodega.registry.membership.core.config import MembershipConfig, SwimConfig
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
from bodega.registry.membership.feed import Feed, FeedLagged
from bodega.registry.membership.udp import Membership
from bodega.registry.node import RegistryConfig, RegistryNode
from bodega.registry.replication.writes import InvalidRow
from bodega.registry.sync.client import subscribe_http

__all__ = [
    "Addr",
    "Delivered",
    "Event",
    "EventKind",
    "Feed",
    "FeedLagged",
    "HostedNode",
    "InvalidRow",
    "Item",
    "ItemTooLarge",
    "MemberView",
    "Membership",
    "MembershipConfig",
    "Out",
    "Registry",
    "RegistryConfig",
    "RegistryNode",
    "Role",
    "RowChange",
    "Send",
    "Status",
    "Subscription",
    "Swim",
    "SwimConfig",
    "UnknownMember",
    "open_registry",
    "subscribe_http",
]
