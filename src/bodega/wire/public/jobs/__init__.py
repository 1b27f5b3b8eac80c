"""Batch jobs' public API on the wire: the ``/sched`` API's bodies (``api``: what users
and external workers send, and what comes back) and its typed client (``client``).
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
