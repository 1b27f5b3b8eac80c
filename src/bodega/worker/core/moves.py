"""A machine's move to another worker, as its source decides it: pure.

A move keeps the machine's id, app, name, config, metadata and history; only its worker
(and its address there) changes. The source drives it as one operation::

    move_machine   moving ─▶ [copying] ─▶ handoff ─▶ teardown ─▶ [dropping] ─▶ moved·
                   (stop,    (its volume's (the target  (the run's   (the volume's
                   its stop_  data to the   imports the  traces and   data here)
                   config)    target)       record)      network)
                   ([...]: a machine with a volume; the record is then forgotten)

    stimulus          from                              decision
    Move              started created stopped failed    begin move_machine
                      a move under way                  409
                      the target is this worker         400
    moved entered     its last step                     forget the record: the target has it
    OperationFailed   at moving, copying or handoff     rests stopped; started again here if
                      (refused, a digest that differs)  it was running (the rollback)
                      at teardown or dropping           forgotten all the same (handed over)

The target's import (``ops/moves.py``) is idempotent by ``move_id`` and claims room in
its own transaction; a refusal (no room, cordoned) fails the handoff and the source
rolls back. A target that does not answer is asked again until it does, never given up
on: it may have taken the machine, and a rollback then would leave two copies. The
target's record carries the source's ``generation`` plus one, which its registry row
carries too, so the newer owner's row wins in every replica
(``registry/replication/core/rows.py``).
"""

from __future__ import annotations

from enum import StrEnum

from bodega.model.errors import BadRequest, Conflict
from bodega.model.states import MachineState as S
from bodega.worker.core.decisions import Decision, Forget, Move
from bodega.worker.core.payloads import MoveMachine
from bodega.worker.core.policy import may_begin
from bodega.worker.core.records import MachineRow
from bodega.worker.core.suspend import thawing


class AfterFailure(StrEnum):
    """What a move that failed at a step leaves."""

    REST = "rest"  # stopped here, as it was
    RESTART = "restart"  # started again here: it was running
    FORGET = "forget"  # the target has it already: the record goes all the same


def move(record: MachineRow, stimulus: Move) -> Decision:
    """Begin the move of ``record`` from this worker to ``stimulus.target``."""
    if stimulus.target == stimulus.source:
        raise BadRequest(f"machine {record.id} is on worker {stimulus.source} already")
    if stimulus.running_move:
        raise Conflict(f"machine {record.id} is being moved already", status="moving")
    may_begin(MoveMachine.fsm, record)
    running = record.state == S.STARTED
    return Decision(begin=MoveMachine(
        move_id=stimulus.move_id, target=stimulus.target, target_url=stimulus.target_url,
        generation=record.generation + 1, reason=stimulus.reason,
        resting=str(S.STOPPING if running else record.state), was_running=running,
        start_there=stimulus.start, volume_id=record.volume_id,
        reservation_id=stimulus.reservation_id, thaw=thawing(record)))


def moved(payload: MoveMachine) -> Decision:
    """Its last step: the record goes, only where it went is kept."""
    return Decision(forget=Forget(payload.target, payload.generation))


def after_failure(payload: MoveMachine) -> AfterFailure:
    """A failure before the handoff was taken leaves the machine here; after, it is gone."""
    if payload.failed_step in ("teardown", "dropping"):
        return AfterFailure.FORGET
    return AfterFailure.RESTART if payload.was_running else AfterFailure.REST
