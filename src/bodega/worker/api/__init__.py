"""The worker's HTTP face: the internal API brokers and proxies call.

``server`` serves the host's routes (health, capacity, reservations, cordon, the
log, metrics) and mounts ``machine_routes``, ``lease_routes``, ``volume_routes``
and ``log_routes`` (a machine's output as NDJSON); ``render`` shows a machine or
a volume as the Fly Machines API does. Routes only read bodies into typed models,
call the operations (``worker.ops``) and render what they answer.

Internal to the worker: import from the modules (the worker's surface is
``bodega.worker``).
"""

__all__: list[str] = []
