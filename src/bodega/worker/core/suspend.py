"""Suspend and resume, the pure part: when a machine may be frozen, and what a resume is.

A suspend freezes the machine's process where it stands (the driver's cgroup
freezer) and keeps its memory; a start of a suspended machine thaws the same
process (same run, same ``start_seq``) instead of spawning a new one. A vm's
suspend writes its VM to a snapshot file and ends its qemu instead; its resume is
the same run in a new qemu loaded from the file, whose handle the resume records.
Its compute stays held while it is suspended: the memory is still resident (for a
vm, it will be again at the resume), so a resume never waits for room. An
operation that ends the run of a suspended machine (stop, update, destroy) thaws
it first (``thaw`` in its payload): on a cgroup v1 freezer a frozen process does
not die of SIGKILL until it is thawed; a vm's program hears the stop's signal.

    stimulus            from (state)                          decision
    Suspend             started                                begin suspend_machine
                        suspended                              nothing (already there)
                        anything else                          412, as the other transitions
    Start               suspended                              begin resume_machine
    Stop, Update,       suspended                              their operation, thawing first
    Destroy
"""

from __future__ import annotations

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, PreconditionFailed
from bodega.model.states import MachineState as S
from bodega.worker.core.decisions import Changes, Decision, Suspend
from bodega.worker.core.payloads import ResumeMachine, SuspendMachine
from bodega.worker.core.policy import may_begin
from bodega.worker.core.records import MachineRow

# Fly suspends only machines of at most 2 GB and without a schedule; bodega keeps the
# same rules so a client sees the same answers here as there.
MAX_SUSPEND_MEMORY_MB = 2048


def suspend(record: MachineRow, stimulus: Suspend) -> Decision:
    if not stimulus.can_suspend:
        raise BadRequest("unimplemented: suspend is not supported by this worker's driver; "
                         "use stop", status="unimplemented")
    if not may_begin("suspend_machine", record):
        return Decision(already=True)
    if record.handle is None:
        raise PreconditionFailed(
            f"failed_precondition: machine {record.id} has no process to suspend")
    if record.config.schedule:
        raise PreconditionFailed(
            f"failed_precondition: machine {record.id} has a schedule; scheduled machines "
            "cannot be suspended")
    if record.config.effective_guest().runs_in == "vm" and record.config.mounts:
        # Its volume is shared by virtiofs, whose state in qemu does not go to a snapshot.
        raise PreconditionFailed(
            f"failed_precondition: machine {record.id} is a vm with a volume; a vm with a "
            "volume cannot be suspended (stop it instead)")
    memory_mb = record.config.effective_guest().memory_mb
    if memory_mb > MAX_SUSPEND_MEMORY_MB:
        raise PreconditionFailed(
            f"failed_precondition: machine {record.id} has {memory_mb} MB of memory; only "
            f"machines with at most {MAX_SUSPEND_MEMORY_MB} MB can be suspended")
    return Decision(begin=SuspendMachine())


def resume(record: MachineRow) -> Decision:
    """A start of a suspended machine: thaw its process, same run."""
    if not may_begin("resume_machine", record):
        return Decision(already=True)
    if record.holds_compute:  # it kept its compute: a resume never waits for room
        return Decision(begin=ResumeMachine())
    return Decision(room=Ask.for_config(record.config), changes=Changes(holds_compute=True),
                    begin=ResumeMachine())


def thawing(record: MachineRow) -> bool:
    """Whether an operation that ends the run must thaw it first: it is frozen."""
    return record.state == S.SUSPENDED
