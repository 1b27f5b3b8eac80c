"""Pure shared types: ids, machine config, the answer models (a machine, its events, a volume),
states, capacity, errors.

Its names load on first use (PEP 562): a command that needs one small module
(``bodega.model.errors``) does not pay for the pydantic models beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.model.capacity import (
        Ask,
        Totals,
        Usage,
        describe_free,
        fits,
        shortfalls,
    )
    from bodega.model.duration import (
        format_duration,
        parse_duration,
    )
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
        Unreachable,
        from_wire,
    )
    from bodega.model.machine import (
        ExitStatus,
        Machine,
        MachineEvent,
        image_ref,
        rfc3339,
    )
    from bodega.model.machine_config import (
        Guest,
        MachineConfig,
        preset,
    )
    from bodega.model.states import (
        MachineState,
        is_active,
        is_settled,
    )
    from bodega.model.volume import Volume

_MODULE = {
    "Ask": "capacity",
    "BadRequest": "errors",
    "BodegaError": "errors",
    "Conflict": "errors",
    "ExitStatus": "machine",
    "Forbidden": "errors",
    "Guest": "machine_config",
    "Indeterminate": "errors",
    "InsufficientCapacity": "errors",
    "Machine": "machine",
    "MachineConfig": "machine_config",
    "MachineEvent": "machine",
    "MachineState": "states",
    "NotFound": "errors",
    "PayloadTooLarge": "errors",
    "PreconditionFailed": "errors",
    "StorageFull": "errors",
    "Timeout": "errors",
    "Totals": "capacity",
    "Unauthorized": "errors",
    "Unavailable": "errors",
    "Unprocessable": "errors",
    "Unreachable": "errors",
    "Usage": "capacity",
    "Volume": "volume",
    "describe_free": "capacity",
    "fits": "capacity",
    "format_duration": "duration",
    "from_wire": "errors",
    "image_ref": "machine",
    "is_active": "states",
    "is_settled": "states",
    "parse_duration": "duration",
    "preset": "machine_config",
    "rfc3339": "machine",
    "shortfalls": "capacity",
}

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
    "Machine",
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
    "Unreachable",
    "Usage",
    "Volume",
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


__getattr__ = lazy(__name__, globals(), _MODULE)
