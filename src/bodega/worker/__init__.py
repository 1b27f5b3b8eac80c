"""The worker (flyd): the single source of truth for everything on its host.

Its names load on first use (PEP 562): a command that needs one small module
(``bodega.worker.images.core.reference``) does not pay for the daemon beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.worker.config import WorkerConfig
    from bodega.worker.daemon import Worker

_MODULE = {
    "Worker": "daemon",
    "WorkerConfig": "config",
}

__all__ = [
    "Worker",
    "WorkerConfig",
]


__getattr__ = lazy(__name__, globals(), _MODULE)
