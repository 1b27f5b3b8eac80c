"""bodega's daemons talking to each other: calls no user's tool makes.

The worker's internal API (``worker_calls.py`` and its client ``worker_client.py``),
batch jobs between brokers, a job's home and its runners (``jobs/``), a certificate asked
of the signer (``cert_client.py``), a host joining (``join.py``, with the join tokens'
admin routes), and the edge's certificates as the broker takes them and the registry
keeps them (``certificates.py``). Requests forbid unknown fields: caller and callee ship
together. A call may carry a public model (a create carries its placement record).
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
