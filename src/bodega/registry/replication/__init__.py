"""Replication: the replica, a SQLite view of the cluster's rows.

``Replica`` (``replica.py``) applies the pure decisions of ``core/`` (rows and their merge,
versions seen, the ledger, validation, the schema, anti-entropy's requests and replies) to
its view (``view.py``) in one transaction with its bookkeeping; ``writes.py`` numbers this
node's own rows. How the rows travel between members is peer sync's (``registry/sync``);
subscriptions to them are the public API's (``registry/api``).
"""

from bodega.registry.replication.core.rows import Change, Row
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View
from bodega.registry.replication.writes import InvalidRow

__all__ = [
    "Change",
    "InvalidRow",
    "Replica",
    "Row",
    "View",
]
