"""The worker's operations: everything that changes a machine or a volume.

The services the API calls (``machines``, ``volumes``, ``actions``), what a create
checks and records (``creation``, ``claims``), the shell around the pure core
(``lifecycle``: lock, transaction, apply, drive; ``locks``), the operation runner
and its effects on the host (``runner``, ``effects``), and what watches running
machines (``supervision`` of their processes, ``health`` checks, ``watch`` for
``/wait``).

Internal to the worker: import from the modules (the worker's surface is
``bodega.worker``).
"""

__all__: list[str] = []
