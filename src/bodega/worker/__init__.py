"""The worker (flyd): the single source of truth for everything on its host.

Its names load on first use (PEP 562): a command that needs one small module
(``bodega.worker.images.reference``) does not pay for the daemon beside it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
