"""What crosses the wire: the Machines API's bodies, the worker's internal calls, the JSON
clients of both, and the HTTP glue (error shape, bounded bodies, tokens) every server shares.

Its names load on first use (PEP 562): a command that needs one small module
(``bodega.wire.json_client``) does not pay for the pydantic models beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.wire.json_client import (
        NONCE_HEADER,
        JsonClient,
    )
    from bodega.wire.machines_client import MachinesClient
    from bodega.wire.worker_calls import (
        WorkerAnswer,
        WorkerRequest,
    )
    from bodega.wire.worker_client import WorkerClient

_MODULE = {
    "JsonClient": "json_client",
    "MachinesClient": "machines_client",
    "NONCE_HEADER": "json_client",
    "WorkerAnswer": "worker_calls",
    "WorkerClient": "worker_client",
    "WorkerRequest": "worker_calls",
}

__all__ = [
    "NONCE_HEADER",
    "JsonClient",
    "MachinesClient",
    "WorkerAnswer",
    "WorkerClient",
    "WorkerRequest",
]


__getattr__ = lazy(__name__, globals(), _MODULE)
