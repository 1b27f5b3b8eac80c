"""The worker (flyd): the single source of truth for everything on its host."""

from bodega.worker.config import WorkerConfig
from bodega.worker.daemon import Worker

__all__ = [
    "Worker",
    "WorkerConfig",
]
