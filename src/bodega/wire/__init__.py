"""What crosses the wire, in three rooms by who speaks it: ``public/`` (the Machines API and
bodega's other public routes, and the typed clients users' tools would use), ``internal/``
(what bodega's daemons say to each other, and their clients) and ``transport/`` (how both
travel: the transport seam and its carriers, the JSON client, the HTTP glue every server
shares, the WebSocket relays). Each room imports only those after it (an import contract).

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
