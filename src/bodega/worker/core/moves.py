"""A machine's move to another worker, as its source decides it: pure.

A move keeps the machine's id, app, name, config, metadata and history; only its worker
(and its address there) changes. The source drives it as one operation::

    move_machine   moving ─▶ [copying] ─▶ handoff ─▶ teardown ─▶ [dropping] ─▶ moved·
                   (stop,    (its volume's (the target  (the run's   (the volume's
                   its stop_  data to the   imports the  traces and   data here)
                   config)    target)       record)      network)
                   ([...]: a machine with a volume; the record is then forgotten)

    live           leaving ─▶ handing ─▶ migrating ─▶ teardown ─▶ moved·
                   (no stop)  (the target  (the VM's state to
                              waits for    the target's qemu, which
                              its state)   goes on with it)

A running ``vm`` machine with no volume and no swap disk moves live (``live_refusal``
says why another does not): it is never stopped here; the target's import starts a qemu
waiting for its state, and ``migrating`` (``ops/live_moves.py``) migrates the VM to it
while the guest runs, then the target lets it go on (or, if the migration fails, boots
it afresh: the move as it is for any other machine, and its event says which).

    stimulus          from                              decision
    Move              started created stopped failed    begin move_machine
                      a move under way                  409
                      the target is this worker         400
    moved entered     its last step                     forget the record: the target has it
    OperationFailed   at moving, copying, handoff       rests stopped; started again here if
                      (refused, a digest that differs)  it was running (the rollback)
                      at leaving or handing             started: the VM was never stopped
                      at migrating, teardown, dropping  forgotten all the same (handed over)

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
    RUNS = "runs"  # a live move's VM was never stopped here: it is started, as it was


def live_refusal(record: MachineRow) -> str | None:
    """Why ``record`` does not move live (None: it does). Live is a running VM's alone;
    its volume is a virtiofs share, whose device qemu does not migrate, and its swap disk
    is not carried with it."""
    config = record.config
    if record.state != S.STARTED:
        return "it is not running"
    if config.effective_guest().runs_in != "vm":
        return "it is not a vm machine"
    if record.volume_id is not None:
        return "its volume is shared with the VM by virtiofs, which qemu does not migrate"
    if config.init is not None and config.init.swap_size_mb:
        return "its swap disk is not carried"
    return None


def move(record: MachineRow, stimulus: Move) -> Decision:
    """Begin the move of ``record`` from this worker to ``stimulus.target``."""
    if stimulus.target == stimulus.source:
        raise BadRequest(f"machine {record.id} is on worker {stimulus.source} already")
    if stimulus.running_move:
        raise Conflict(f"machine {record.id} is being moved already", status="moving")
    may_begin(MoveMachine.fsm, record)
    running = record.state == S.STARTED
    live = running and live_refusal(record) is None
    resting = S.STARTED if live else S.STOPPING if running else record.state
    return Decision(begin=MoveMachine(
        move_id=stimulus.move_id, target=stimulus.target, target_url=stimulus.target_url,
        generation=record.generation + 1, reason=stimulus.reason, live=live,
        resting=str(resting), was_running=running,
        start_there=stimulus.start, volume_id=record.volume_id,
        reservation_id=stimulus.reservation_id, thaw=thawing(record)))


def moved(payload: MoveMachine) -> Decision:
    """Its last step: the record goes, only where it went is kept."""
    return Decision(forget=Forget(payload.target, payload.generation))


def after_failure(payload: MoveMachine) -> AfterFailure:
    """A failure before the handoff was taken leaves the machine here; after, it is gone."""
    if payload.failed_step in ("migrating", "teardown", "dropping"):
        return AfterFailure.FORGET
    if payload.live:
        return AfterFailure.RUNS
    return AfterFailure.RESTART if payload.was_running else AfterFailure.REST
