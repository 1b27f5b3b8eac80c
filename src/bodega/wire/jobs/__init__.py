"""Batch jobs on the wire: the ``/sched`` API's bodies (``api``), the calls between bodega's
own components (``calls``: broker to a job's home, worker to worker), and typed clients of
each (``client``: the public API; ``worker_client``: a worker's job routes).
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
