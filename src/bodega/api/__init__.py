"""What crosses the wire: the Machines API's bodies, the worker's internal calls, the JSON
clients of both, and the HTTP glue (error shape, bounded bodies, tokens) every server shares."""

from bodega.api.json_client import NONCE_HEADER, JsonClient
from bodega.api.machines_client import MachinesClient
from bodega.api.worker_client import WorkerClient
from bodega.api.worker_wire import WorkerAnswer, WorkerRequest

__all__ = [
    "NONCE_HEADER",
    "JsonClient",
    "MachinesClient",
    "WorkerAnswer",
    "WorkerClient",
    "WorkerRequest",
]
