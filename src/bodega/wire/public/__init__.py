"""The public API on the wire: what users' tools speak to bodega.

The Machines API's bodies and answers, field for field (``fly.py``, ``apps.py``,
``fly_certificates.py``, ``secret_keys.py``, ``tokens.py``), bodega's public routes beside
them (releases, secrets, logs, the placement record, the platform and cluster routes, the
gossip keyring, batch jobs' ``/sched`` in ``jobs/``), the registry's query API, and the
typed clients of them (``machines_client.py``, ``jobs/client.py``). Nothing here imports
``wire.internal``: a daemon's calls may carry these models, never the other way round.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
