"""Each operation's payload, typed: one frozen dataclass per state machine.

A payload is what an operation carries from its first step to its last: what
the core decided when it began it (the run to start, whether to launch, the
signal to stop with), what its effects reported on the way (the pid spawned,
how the run ended) and, once a step failed, the error. ``core/fsm.py`` names
the fields a step depends on (checked when the table is built), ``rules.py``
builds payloads, the effects read them and the runner records them with every
step.

On disk a payload is the JSON object it always was (the ``ops`` log and the
``operations`` table): ``payload_json`` writes a field only when it is set
(None and a false flag, ``thaw`` or ``attached``, are left out) and
``payload_from_json`` reads one back, ignoring keys it does not know, so an
operation an older worker logged resumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from bodega.model.json import JsonObject


@dataclass(frozen=True, kw_only=True)
class Payload:
    """What every operation carries."""

    fsm: ClassVar[str]  # the state machine it belongs to (``core/fsm.py``)
    source: str = "user"  # who began it: "user" (a call) or "flyd" (the worker itself)
    reason: str | None = None  # why the worker began it, when not for a call: its events say
    error: str | None = None  # once a step failed: why
    failed_step: str | None = None  # and which step


@dataclass(frozen=True, kw_only=True)
class StartsRun(Payload):
    """An operation that spawns a run of the machine (``spawn``)."""

    start_seq: int  # the run, raised when the operation began: a repeated spawn names it
    pid: int | None = None  # reported by the spawn


@dataclass(frozen=True, kw_only=True)
class EndsRun(Payload):
    """An operation that first ends the machine's run (``stop_task``)."""

    thaw: bool = False  # the run is frozen (suspended): thaw it before signalling
    signal: str | int | None = None  # None: the config's stop signal
    timeout: float | None = None  # seconds until SIGKILL; None: the config's stop timeout
    exit: Mapping[str, Any] | None = None  # reported: how the run ended, as its exit event


@dataclass(frozen=True, kw_only=True)
class CreateMachine(Payload):
    fsm: ClassVar[str] = "create_machine"
    launch: bool = False  # begin the start once created (the create did not skip_launch)


@dataclass(frozen=True, kw_only=True)
class StartMachine(StartsRun):
    fsm: ClassVar[str] = "start_machine"
    delay: float = 0.0  # seconds to back off first (a crash loop); 0: none
    # Begun by the create that has just attached the machine's network, in the commit that
    # ends it: ``starting`` has nothing to attach while the namespace stands.
    attached: bool = False


@dataclass(frozen=True, kw_only=True)
class StopMachine(EndsRun):
    fsm: ClassVar[str] = "stop_machine"


@dataclass(frozen=True, kw_only=True)
class ExitMachine(Payload):
    fsm: ClassVar[str] = "exit_machine"


@dataclass(frozen=True, kw_only=True)
class RestartMachine(EndsRun, StartsRun):
    fsm: ClassVar[str] = "restart_machine"


@dataclass(frozen=True, kw_only=True)
class UpdateMachine(EndsRun, StartsRun):
    fsm: ClassVar[str] = "update_machine"
    launch: bool = False  # start the new version; else settle in ``rest_state``
    rest_state: str  # where a machine that does not launch comes to rest


@dataclass(frozen=True, kw_only=True)
class SuspendMachine(Payload):
    fsm: ClassVar[str] = "suspend_machine"


@dataclass(frozen=True, kw_only=True)
class ResumeMachine(Payload):
    fsm: ClassVar[str] = "resume_machine"


@dataclass(frozen=True, kw_only=True)
class DestroyMachine(EndsRun):
    fsm: ClassVar[str] = "destroy_machine"


@dataclass(frozen=True, kw_only=True)
class MoveMachine(EndsRun):
    """A move of the machine to another worker (``core/moves.py``): stopped here (its
    ``stop_config`` honoured), its record handed to ``target``, which starts it if it
    was running, then let go of here."""

    fsm: ClassVar[str] = "move_machine"
    move_id: str  # the same on both workers: the target's import is idempotent by it
    target: str  # the worker it goes to
    target_url: str  # that worker's internal API
    generation: int  # the machine's generation on the target (one more than here)
    resting: str  # its state while it is stopped for the move (``stopping`` if started)
    was_running: bool = False  # started here: started there, or again here on a rollback
    start_there: bool = False  # started there though it rests here (a start found no room)
    volume_id: str | None = None  # its volume: copied there first, removed here last
    digest: str | None = None  # reported: the volume's data as the target holds it
    reservation_id: str | None = None  # room the broker reserved on the target for it
    # A running vm machine moves live (``core/moves.py``): never stopped here, its memory
    # migrated to the target's qemu after the handoff (``migrating``).
    live: bool = False
    migrated: str | None = None  # reported: how the live step ended ("live ...", "cold ...")


@dataclass(frozen=True, kw_only=True)
class CreateVolume(Payload):
    fsm: ClassVar[str] = "create_volume"
    snapshot_id: str | None = None  # start as a copy of this snapshot's data


@dataclass(frozen=True, kw_only=True)
class DeleteVolume(Payload):
    fsm: ClassVar[str] = "delete_volume"


PAYLOADS: dict[str, type[Payload]] = {
    kind.fsm: kind
    for kind in (CreateMachine, StartMachine, StopMachine, ExitMachine, RestartMachine,
                 UpdateMachine, SuspendMachine, ResumeMachine, DestroyMachine, MoveMachine,
                 CreateVolume, DeleteVolume)
}

_FAILURE = ("error", "failed_step")  # written last, as they were added last
_SECONDS = ("delay", "timeout")  # numbers a JSON writer may have left as integers
# Left out when false, as they were before they existed.
_FLAGS = ("thaw", "attached", "start_there", "live")


def payload_json(payload: Payload) -> JsonObject:
    """The payload as the JSON object the store keeps: set fields only."""
    names = [f.name for f in fields(payload) if f.name not in _FAILURE] + list(_FAILURE)
    out: JsonObject = {}
    for name in names:
        value = getattr(payload, name)
        if value is None or (name in _FLAGS and value is False):
            continue
        out[name] = dict(value) if isinstance(value, Mapping) else value
    return out


def payload_from_json(fsm: str, data: Mapping[str, Any]) -> Payload:
    """The payload of an operation of ``fsm`` from its stored JSON object.

    Keys the payload has no field for are ignored (nothing reads them); a field
    the operation cannot do without (``start_seq``, ``rest_state``) that is
    missing is a ``ValueError`` naming the operation and the object.
    """
    kind = PAYLOADS.get(fsm)
    if kind is None:
        raise ValueError(f"no operation is named {fsm!r}")
    known = {f.name for f in fields(kind)}
    values = {name: value for name, value in data.items() if name in known}
    for name in _SECONDS:
        if values.get(name) is not None:
            values[name] = float(values[name])
    try:
        return kind(**values)
    except TypeError as exc:
        raise ValueError(f"{fsm} payload {dict(data)!r}: {exc}") from None
