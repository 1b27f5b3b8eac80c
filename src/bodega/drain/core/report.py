"""A drain's and a rebalance's plans and walks as ``--json`` prints them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bodega.drain.core.plan import Move, Stuck


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlannedMove(Report):
    machine: str
    app: str
    state: str  # as it is moved: a stopped machine moves stopped
    origin: str = Field(serialization_alias="from")
    target: str = Field(serialization_alias="to")
    why: str
    interrupts: bool = False  # its app's only healthy started machine: unserved while it moves
    error: str | None = None  # a walk's: why it did not happen

    @classmethod
    def of(cls, move: Move, error: str | None = None) -> PlannedMove:
        unit = move.unit
        return cls(machine=unit.id, app=unit.app, state=unit.state, origin=unit.worker,
                   target=move.target, why=move.why, interrupts=move.interrupts, error=error)


class StuckMachine(Report):
    machine: str
    app: str
    state: str
    worker: str
    why: str

    @classmethod
    def of(cls, stuck: Stuck) -> StuckMachine:
        unit = stuck.unit
        return cls(machine=unit.id, app=unit.app, state=unit.state, worker=unit.worker,
                   why=stuck.why)


class DrainReport(Report):
    name: str  # as asked: a host, or a worker
    workers: list[str]  # the workers drained
    dry_run: bool
    moves: list[PlannedMove]
    stuck: list[StuckMachine]
    moved: int = 0
    failed: list[PlannedMove] = []
    stopped: str | None = None
    seconds: float = 0.0


class RebalanceReport(Report):
    dry_run: bool
    running: bool
    before: str  # the score as the simulator words it
    after: str
    moves: list[PlannedMove]
    moved: int = 0
    failed: list[PlannedMove] = []
    stopped: str | None = None
    seconds: float = 0.0
