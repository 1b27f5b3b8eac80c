"""Whether a machine's memory limit may be set, and what its memory answer says: pure.

A limit lives between what the machine uses now (a lower one would have the
kernel take memory the program holds) and its reservation (``guest.memory_mb``,
what the ledger counts): above that would spend memory the host promised to
others. The reservation is not shrunk by a lower limit: the ledger keeps
counting all of it, so a machine can be given its memory back at any time.
"""

from __future__ import annotations

from bodega.model.errors import BadRequest, PreconditionFailed
from bodega.model.machine_answers import MemoryAnswer
from bodega.model.states import MachineState
from bodega.worker.core.records import MachineRow

MIB = 1024 * 1024


def memory_answer(record: MachineRow, usage_bytes: int | None) -> MemoryAnswer:
    """Its limit, and what is left of it: all of it when nothing runs to use any."""
    limit = record.memory_limit
    used_mb = 0 if usage_bytes is None else -(-usage_bytes // MIB)  # rounded up
    return MemoryAnswer(limit_mb=limit, available_mb=max(limit - used_mb, 0))


def check_settable(record: MachineRow) -> None:
    """Refuse a machine whose memory is not to be touched now."""
    if record.state == MachineState.DESTROYED:
        raise PreconditionFailed(f"failed_precondition: machine {record.id} is destroyed")
    if record.state == MachineState.SUSPENDED:
        raise PreconditionFailed(f"failed_precondition: machine {record.id} is suspended; "
                                 "start it first")


def check_limit(record: MachineRow, limit_mb: int | None, usage_bytes: int | None) -> int:
    """The limit to set, or the reason it cannot be: 400 out of range, 412 under its use."""
    check_settable(record)
    if limit_mb is None or limit_mb <= 0:
        raise BadRequest("invalid_argument: limit_mb is required, a whole number of MB above 0")
    if limit_mb > record.memory_mb:
        raise BadRequest(
            f"invalid_argument: limit_mb {limit_mb} is above machine {record.id}'s reservation "
            f"of {record.memory_mb} MB (guest.memory_mb); update the machine to reserve more")
    if usage_bytes is not None and limit_mb * MIB < usage_bytes:
        used_mb = -(-usage_bytes // MIB)
        raise PreconditionFailed(
            f"failed_precondition: limit_mb {limit_mb} is below the {used_mb} MB machine "
            f"{record.id} uses now; reclaim memory first or choose a higher limit")
    return limit_mb


def check_reclaim(record: MachineRow, amount_mb: int | None) -> int | None:
    """The amount to reclaim (None: all the kernel can); only a started machine has any."""
    check_settable(record)
    if amount_mb is not None and amount_mb < 0:
        raise BadRequest("invalid_argument: amount_mb must not be negative")
    if record.state != MachineState.STARTED or record.handle is None:
        raise PreconditionFailed(f"failed_precondition: machine {record.id} is {record.state}, "
                                 "not started: it holds no memory to reclaim")
    return amount_mb or None
