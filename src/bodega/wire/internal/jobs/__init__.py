"""Batch jobs between bodega's own components: the calls (``calls``: broker to a job's
home, worker to worker) and a typed client of a worker's job routes (``worker_client``).
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
