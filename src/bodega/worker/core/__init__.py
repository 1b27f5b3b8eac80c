"""The worker's pure core: every rule about a machine, as ``decide(record, stimulus)``.

Its folder is its boundary: it imports nothing of the worker outside it. ``rules``
decides (with ``annotations``, ``policy``, ``suspend`` and ``checks``) over the typed
stimuli and decisions of ``decisions``; ``fsm`` declares each operation's state machine
and ``payloads`` what each carries; ``records`` holds the rows it reads.
"""

from bodega.worker.core.decisions import (
    Changes,
    CheckResult,
    Cordon,
    Create,
    Decision,
    Destroy,
    EventSpec,
    ExitDecision,
    ExitObserved,
    Note,
    OperationEnded,
    OperationFailed,
    Recovered,
    Restart,
    SetMetadata,
    Signal,
    Sizing,
    Start,
    StepEntered,
    Stimulus,
    Stop,
    Suspend,
    Then,
    Update,
)
from bodega.worker.core.policy import (
    BEGINS,
    RESTART_WINDOW,
    after_exit,
    may_begin,
    restart_delay,
)
from bodega.worker.core.rules import decide

__all__ = [
    "BEGINS", "RESTART_WINDOW", "Changes", "CheckResult", "Cordon", "Create",
    "Decision", "Destroy", "EventSpec", "ExitDecision", "ExitObserved", "Note",
    "OperationEnded", "OperationFailed", "Recovered", "Restart", "SetMetadata", "Signal",
    "Sizing", "Start", "StepEntered", "Stimulus", "Stop", "Suspend", "Then", "Update",
    "after_exit",
    "decide", "may_begin", "restart_delay",
]
