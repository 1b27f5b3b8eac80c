"""What crosses the wire: the Machines API's bodies, the worker's internal calls, the JSON
clients of both, and the HTTP glue (error shape, bounded bodies, tokens) every server shares.

Its names load on first use (PEP 562): a command that needs one small module
(``bodega.wire.transport.json_client``) does not pay for the pydantic models beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.wire.internal.worker_calls import (
        WorkerAnswer,
        WorkerRequest,
    )
    from bodega.wire.internal.worker_client import WorkerClient
    from bodega.wire.public.machines_client import MachinesClient
    from bodega.wire.transport.json_client import (
        NONCE_HEADER,
        JsonClient,
    )

_MODULE = {
    "JsonClient": "transport.json_client",
    "MachinesClient": "public.machines_client",
    "NONCE_HEADER": "transport.json_client",
    "WorkerAnswer": "internal.worker_calls",
    "WorkerClient": "internal.worker_client",
    "WorkerRequest": "internal.worker_calls",
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
