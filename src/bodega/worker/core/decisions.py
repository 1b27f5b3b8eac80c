"""What goes into the worker's pure core (stimuli) and what comes out (decisions).

All frozen: ``core.decide`` builds them, the shell in ``ops/lifecycle.py`` applies them. A
decision begins an operation by its typed payload (``payloads.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, TypedDict

from bodega.model.capacity import Ask
from bodega.model.machine import EventRequest, ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.worker.core.checks import CheckStates
from bodega.worker.core.payloads import Payload

# -- stimuli ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Create:
    launch: bool  # not skip_launch: start it once it is created


@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class Stop:
    signal: str | int | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class HostStop:
    """The worker stops its machines because its host's bodega stops (``bodega up`` or
    ``bodega join`` ending): what was started starts again when it comes back."""

    timeout: float  # seconds until SIGKILL


@dataclass(frozen=True)
class Restart:
    signal: str | int | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class Update:
    config: MachineConfig
    instance_id: str  # the new version's id
    millicpus: int  # what the new config holds on this host (its cpu ratio applied)
    skip_launch: bool = False


@dataclass(frozen=True)
class Destroy:
    force: bool = False


@dataclass(frozen=True)
class Signal:
    pass


@dataclass(frozen=True)
class Suspend:
    can_suspend: bool  # the worker's driver can freeze a machine (declares the capability)


@dataclass(frozen=True)
class Cordon:
    cordoned: bool  # out of the proxy's routing, or back in


@dataclass(frozen=True)
class SetMetadata:
    changes: Mapping[str, str | None]  # None removes the key
    version: str | None = None  # refuse unless this is the machine's current version


@dataclass(frozen=True)
class ExitObserved:
    """The process of one run (instance_id, start_seq) ended without being asked to."""

    instance_id: str
    start_seq: int
    exit: ExitStatus
    now: float
    draining: bool  # the worker is stopping its machines to exit


@dataclass(frozen=True)
class StepEntered:
    step: str
    payload: Payload  # the operation's, whose type names its state machine

    @property
    def fsm(self) -> str:
        return self.payload.fsm


@dataclass(frozen=True)
class OperationFailed:
    fsm: str
    payload: Payload | None = None  # the failed operation's, with its error and step


@dataclass(frozen=True)
class Move:
    """Move the machine to worker ``target`` (``core/moves.py``)."""

    move_id: str
    source: str  # the worker it is on: this one
    target: str
    target_url: str
    reason: str | None = None
    reservation_id: str | None = None
    running_move: bool = False  # a move of this machine is under way already
    start: bool = False  # start it there, resting here or not (a start that found no room)


@dataclass(frozen=True)
class OperationEnded:
    fsm: str


@dataclass(frozen=True)
class Recovered:
    """The worker restarted and found this machine with no operation under way (or the
    one it found under way has ended)."""


@dataclass(frozen=True)
class CheckResult:
    """A health check's probe of one run (``start_seq``) of the machine ended."""

    name: str
    status: str  # passing, warning or critical
    output: str
    at: str  # RFC 3339: when the probe ended
    start_seq: int


Stimulus = (Create | Start | Stop | HostStop | Restart | Update | Destroy | Signal | Suspend
            | Cordon | SetMetadata | ExitObserved | StepEntered | OperationFailed | OperationEnded
            | Recovered | CheckResult | Move)

# -- decisions -------------------------------------------------------------------------------


class ExitDecision(StrEnum):
    RESTART = "restart"
    STOP = "stop"
    DESTROY = "destroy"


class Then(StrEnum):
    """What the shell does once the decision has committed."""

    WATCH = "watch"  # supervise the machine's process
    SPARES_CHANGED = "spares_changed"  # an address or namespace came free: wire spares


@dataclass(frozen=True)
class Sizing:
    millicpus: int
    memory_mb: int
    gpus: int
    gpu_kind: str | None


class Columns(TypedDict, total=False):
    """The machine record's columns a decision changes, as the store's update takes them."""

    state: str
    holds_compute: bool
    start_seq: int
    restarts: int
    cordoned: bool
    last_exit: ExitStatus
    config: MachineConfig
    instance_id: str
    checks: CheckStates
    host_stopped: bool
    millicpus: int
    memory_mb: int
    gpus: int
    gpu_kind: str | None
    memory_limit_mb: None  # a new reservation starts whole: no lower limit left
    handle: None  # cleared: the run is gone


@dataclass(frozen=True)
class Changes:
    """Columns of the machine's record to change; None leaves a column as it is."""

    state: str | None = None
    holds_compute: bool | None = None
    start_seq: int | None = None
    restarts: int | None = None
    cordoned: bool | None = None
    last_exit: ExitStatus | None = None
    config: MachineConfig | None = None
    instance_id: str | None = None
    sizing: Sizing | None = None
    checks: CheckStates | None = None
    host_stopped: bool | None = None
    clear_handle: bool = False

    def merge(self, later: Changes) -> Changes:
        """These changes, then ``later``'s on top."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for f in fields(later):
            value = getattr(later, f.name)
            if value is not None:
                values[f.name] = value
        values["clear_handle"] = self.clear_handle or later.clear_handle
        return Changes(**values)

    def columns(self) -> Columns:
        """The changes as the store's column updates."""
        out = Columns()
        if self.state is not None:
            out["state"] = self.state
        if self.holds_compute is not None:
            out["holds_compute"] = self.holds_compute
        if self.start_seq is not None:
            out["start_seq"] = self.start_seq
        if self.restarts is not None:
            out["restarts"] = self.restarts
        if self.cordoned is not None:
            out["cordoned"] = self.cordoned
        if self.last_exit is not None:
            out["last_exit"] = self.last_exit
        if self.config is not None:
            out["config"] = self.config
        if self.instance_id is not None:
            out["instance_id"] = self.instance_id
        if self.checks is not None:
            out["checks"] = self.checks
        if self.host_stopped is not None:
            out["host_stopped"] = self.host_stopped
        if self.sizing is not None:  # a new reservation starts whole: no lower limit left
            out.update(Columns(millicpus=self.sizing.millicpus, memory_mb=self.sizing.memory_mb,
                               gpus=self.sizing.gpus, gpu_kind=self.sizing.gpu_kind,
                               memory_limit_mb=None))
        if self.clear_handle:
            out["handle"] = None
        return out


@dataclass(frozen=True)
class EventSpec:
    type: str
    status: str
    source: str
    request: EventRequest | None = None


@dataclass(frozen=True)
class Note:
    """A log entry that is no operation's step: an exit seen, a cordon, a metadata change."""

    fsm: str  # "supervise" or "action"
    step: str
    payload: Mapping[str, Any]
    event: EventSpec | None = None


@dataclass(frozen=True)
class Forget:
    """The machine moved to ``worker`` (as its generation ``generation``): its record goes
    from this worker, which remembers only where it went."""

    worker: str
    generation: int


@dataclass(frozen=True)
class Decision:
    changes: Changes = Changes()
    room: Ask | None = None  # check this fits beside every other machine before anything
    room_is_conflict: bool = False  # a lack of room refuses with 409 (an update) not 412
    new_version: bool = False  # record the new config as a version, replacing older ones
    release: bool = False  # give back the machine's volume and lease
    begin: Payload | None = None  # the operation to begin, by its payload
    notes: tuple[Note, ...] = ()  # logged with the decision
    exit_decision: ExitDecision | None = None
    then: frozenset[Then] = field(default_factory=frozenset)
    already: bool = False  # the machine is already where the stimulus would lead
    forget: Forget | None = None  # the record goes: the machine lives on another worker now
