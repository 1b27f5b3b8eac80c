"""Pure shared types: ids, machine config, states, capacity, events, errors."""

from bodega.model.capacity import Ask, Totals, Usage, describe_free, fits, shortfalls
from bodega.model.duration import format_duration, parse_duration
from bodega.model.errors import (
    BadRequest,
    BodegaError,
    Conflict,
    Forbidden,
    Indeterminate,
    InsufficientCapacity,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    StorageFull,
    Timeout,
    Unauthorized,
    Unavailable,
    Unprocessable,
    from_wire,
)
from bodega.model.machine import ExitStatus, MachineEvent, image_ref, rfc3339
from bodega.model.machine_config import Guest, MachineConfig, preset
from bodega.model.states import MachineState, is_active, is_settled

__all__ = [
    "Ask",
    "BadRequest",
    "BodegaError",
    "Conflict",
    "ExitStatus",
    "Forbidden",
    "Guest",
    "Indeterminate",
    "InsufficientCapacity",
    "MachineConfig",
    "MachineEvent",
    "MachineState",
    "NotFound",
    "PayloadTooLarge",
    "PreconditionFailed",
    "StorageFull",
    "Timeout",
    "Totals",
    "Unauthorized",
    "Unavailable",
    "Unprocessable",
    "Usage",
    "describe_free",
    "fits",
    "format_duration",
    "from_wire",
    "image_ref",
    "is_active",
    "is_settled",
    "parse_duration",
    "preset",
    "rfc3339",
    "shortfalls",
]
