"""The worker's store: one SQLite file, the log of every operation and its tables.

``database`` holds the transactions, the log and the operations (reads of the
log: ``log_reader``), ``schema`` its migrations; ``queries`` and
``volume_queries`` read and write the materialized tables. Built on them: the
capacity ``ledger``, machine ``leases`` and ``group_commit`` (creates that come
together share one fsync).

Internal to the worker: import from the modules (the worker's surface is
``bodega.worker``).
"""

__all__: list[str] = []
