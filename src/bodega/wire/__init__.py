"""What crosses the wire: the Machines API's bodies, the worker's internal calls, the JSON
clients of both, and the HTTP glue (error shape, bounded bodies, tokens) every server shares."""

from bodega.wire.json_client import NONCE_HEADER, JsonClient
from bodega.wire.machines_client import MachinesClient
from bodega.wire.worker_calls import WorkerAnswer, WorkerRequest
from bodega.wire.worker_client import WorkerClient

__all__ = [
    "NONCE_HEADER",
    "JsonClient",
    "MachinesClient",
    "WorkerAnswer",
    "WorkerClient",
    "WorkerRequest",
]
