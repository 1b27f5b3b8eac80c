"""Where each operation may begin, and the restart policy: pure tables and arithmetic.

The restart policy also says which machines come back with their host. A machine
that was ``started`` when its host's bodega stopped (a graceful stop, which
records it, or a host that went down, whose runs the worker finds over with no
word of how they ended) starts again when the worker comes back, as flyd does
after a host restart, unless:

- its policy is ``no``: Fly never starts such a machine on its own, whatever ended
  its run;
- it is a standby (``config.standbys``): a standby runs only in its primary's
  place, and whether it must is the broker's call, made again once the cluster
  is back (``broker/machines/core/standby.py``).

``on-failure`` comes back like ``always``: the run did not exit on its own, its
host ended it, and the start is not counted against ``max_retries``. A machine
the user stopped, one that had exited on its own, and one suspended (a graceful
stop stops it, as its frozen memory cannot outlive the host's processes) are at
rest already and stay so; a suspended one starts cold on its next start or wake.
"""

from __future__ import annotations

from bodega.model.errors import PreconditionFailed
from bodega.model.machine import ExitStatus
from bodega.model.states import MachineState as S
from bodega.worker.core.decisions import ExitDecision
from bodega.worker.core.records import MachineRow

# Where each operation may begin. A state not listed is refused with a clear error;
# ``None`` means "already there": the call succeeds without doing anything.
BEGINS: dict[str, dict[str, str | None]] = {
    "start_machine": {
        S.CREATED: "start", S.STOPPED: "start", S.FAILED: "start", S.SUSPENDED: "start",
        S.STARTED: None,
    },
    "stop_machine": {
        S.STARTED: "stop", S.CREATED: "stop", S.FAILED: "stop", S.STOPPED: None,
        S.SUSPENDED: "stop",
    },
    "restart_machine": {S.STARTED: "restart"},
    # A start of a suspended machine resumes it (``core/suspend.py``).
    "suspend_machine": {S.STARTED: "suspend", S.SUSPENDED: None},
    "resume_machine": {S.SUSPENDED: "resume", S.STARTED: None},
    "update_machine": {
        S.CREATED: "update", S.STARTED: "update", S.STOPPED: "update", S.FAILED: "update",
        S.SUSPENDED: "update",
    },
    "move_machine": {S.STARTED: "move", S.CREATED: "move", S.STOPPED: "move", S.FAILED: "move"},
    "destroy_machine": {
        S.CREATED: "destroy", S.STOPPED: "destroy", S.FAILED: "destroy", S.STARTED: "destroy",
        S.SUSPENDED: "destroy", S.DESTROYING: "destroy",
    },
}

MAX_METADATA_KEYS = 64

# A crash loop restarts after 0.1 s, 0.2 s, 0.4 s, ... capped at 10 s.
BACKOFF_BASE = 0.1
BACKOFF_CAP = 10.0
# on-failure forgives past crashes once a run has lasted this long.
RESTART_WINDOW = 300.0

# What the events of the stops and starts the host's own stop and return began say.
HOST_STOPPING = "host stopping"
HOST_RESTARTED = "host restarted"


def may_begin(fsm: str, record: MachineRow) -> bool:
    """True if ``fsm`` may begin; False if the machine is already where it would lead."""
    allowed = BEGINS[fsm]
    if record.state not in allowed:
        raise PreconditionFailed(
            f"failed_precondition: cannot {fsm.removesuffix('_machine')} machine {record.id} "
            f"in state {record.state}"
        )
    return allowed[record.state] is not None


def after_exit(
    policy: str, max_retries: int, restarts: int, exit: ExitStatus, auto_destroy: bool
) -> ExitDecision:
    """What a worker does when a machine's main process ends without being asked to."""
    if policy == "always":
        return ExitDecision.RESTART
    if policy == "on-failure" and exit.failed and restarts < max_retries:
        return ExitDecision.RESTART
    if auto_destroy:
        return ExitDecision.DESTROY
    return ExitDecision.STOP


def comes_back(record: MachineRow) -> bool:
    """Whether a machine its host's bodega stopped while ``started`` starts again when the
    worker comes back (see the module's docstring)."""
    policy, _max_retries = record.config.restart_policy()
    return policy != "no" and not record.config.standbys


def restart_delay(restarts: int) -> float:
    return float(min(BACKOFF_CAP, BACKOFF_BASE * (2 ** min(restarts, 16))))
