"""Replication: a SQLite view of the cluster's rows, kept by gossip and anti-entropy.

``Replica`` is the core (writes, merges, sync decisions) over the view
(``view.py``); rows ride on membership's gossip and are pulled over HTTP
(``sync/routes.py``, ``client.py``); subscriptions stream changes. The
simulation of many replicas on the simulated network (``replsim.py``) is for
tests and benchmarks and stays out of this surface.
"""

from bodega.registry.api.subscriptions import RowChange, Subscription
from bodega.registry.replication.core.rows import Change, Row
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View
from bodega.registry.replication.writes import InvalidRow
from bodega.registry.sync.client import subscribe_http

__all__ = [
    "Change",
    "InvalidRow",
    "Replica",
    "Row",
    "RowChange",
    "Subscription",
    "View",
    "subscribe_http",
]
