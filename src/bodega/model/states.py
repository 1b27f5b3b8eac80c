"""Machine states, as the Fly Machines API names them.

::

             create                start               stop
    (none) ─────────▶ created ──────────▶ starting ──▶ started ─────▶ stopping ──▶ stopped
                        │  ▲                 │           │  │ restart                ▲
                        │  │                 ▼           │  └──▶ restarting ──▶ starting
                        │  │               failed        └──────────────────────────┘
                        │  │          (an operation's      (its process exited and the
                        │  │           effect failed)       restart policy says no more)
                        │  └── update, skip_launch ── updating ◀── update (any persistent state)
                        ▼
                    destroying ──▶ destroyed      (from any persistent state)

    started ── suspend ──▶ suspending ──▶ suspended ── start (resume) ──▶ starting ──▶ started
                                          (stop, update and destroy thaw it first)

Persistent states are where a machine rests; transient states are where an
operation is under way. ``replaced`` is the terminal state of a version that
an update superseded; it never appears as a machine's state.
"""

from __future__ import annotations

from enum import StrEnum


class MachineState(StrEnum):
    CREATED = "created"
    STARTING = "starting"
    STARTED = "started"
    STOPPING = "stopping"
    STOPPED = "stopped"
    RESTARTING = "restarting"
    UPDATING = "updating"
    REPLACING = "replacing"
    SUSPENDING = "suspending"
    SUSPENDED = "suspended"
    FAILED = "failed"
    DESTROYING = "destroying"
    DESTROYED = "destroyed"
    LAUNCH_FAILED = "launch_failed"
    REPLACED = "replaced"


PERSISTENT = frozenset(
    {
        MachineState.CREATED,
        MachineState.STARTED,
        MachineState.STOPPED,
        MachineState.SUSPENDED,
        MachineState.FAILED,
        MachineState.DESTROYED,
    }
)
TRANSIENT = frozenset(
    {
        MachineState.STARTING,
        MachineState.STOPPING,
        MachineState.RESTARTING,
        MachineState.UPDATING,
        MachineState.REPLACING,
        MachineState.SUSPENDING,
        MachineState.DESTROYING,
        MachineState.LAUNCH_FAILED,
    }
)

# A machine holds its cpu and memory on its host unless it is at rest without
# a process. Stopped machines give their room back and must win it again to
# start, as on Fly (start can answer 409 "could not reserve resource"). A suspended
# machine keeps holding them: its frozen process keeps its memory resident (a vm's is in
# its snapshot file until its resume loads it back), and a resume must never be refused
# for room.
RELEASES_COMPUTE = frozenset(
    {MachineState.STOPPED, MachineState.FAILED, MachineState.DESTROYED}
)

WAITABLE = frozenset(
    {
        MachineState.STARTED,
        MachineState.STOPPED,
        MachineState.SUSPENDED,
        MachineState.DESTROYED,
        MachineState.FAILED,
    }
)


def is_settled(state: str) -> bool:
    return state in PERSISTENT


def is_active(state: str) -> bool:
    """Clients count every machine that is not destroyed or being destroyed."""
    return state not in (MachineState.DESTROYED, MachineState.DESTROYING)
