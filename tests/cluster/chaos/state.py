"""What the invariant checker sees: a typed snapshot of the cluster, read from outside."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Totals(Model):
    millicpus: int
    memory_mb: int


class StoredMachine(Model):
    """A row of a worker's ``machines`` table."""

    id: str
    app: str
    state: str
    millicpus: int
    memory_mb: int
    holds_compute: bool
    idempotency_key: str | None = None


class StoredReservation(Model):
    id: str
    millicpus: int
    memory_mb: int
    live: bool  # unexpired and unclaimed: it still counts against the ledger


class WorkerState(Model):
    """One worker as its own store (opened read-only) says it is."""

    name: str
    totals: Totals
    machines: list[StoredMachine] = Field(default_factory=list)
    reservations: list[StoredReservation] = Field(default_factory=list)
    unfinished_ops: list[str] = Field(default_factory=list)  # "fsm:step on resource"


class MachineProcess(Model):
    """A live process that carries ``BODEGA_MACHINE_ID`` (found in /proc)."""

    pid: int
    machine_id: str
    host: str | None  # the worker whose network namespace it runs in, if any


class CreateOutcome(Model):
    """What a client was told about one create (after its retries)."""

    key: str
    app: str
    machine_id: str | None = None  # set when a create answered 200
    failed: bool = False  # a definite refusal (4xx): nothing may be left behind


class Expectation(Model):
    """States a machine may settle in given what its client was told."""

    machine_id: str
    states: list[str]
    history: list[str] = Field(default_factory=list)  # the last answers, to explain a miss


class RegistryView(Model):
    node: str
    machines: dict[str, str]  # id -> state, live (not tombstoned) rows


class Snapshot(Model):
    workers: list[WorkerState]
    processes: list[MachineProcess]
    creates: list[CreateOutcome] = Field(default_factory=list)
    expectations: list[Expectation] = Field(default_factory=list)
    views: list[RegistryView] = Field(default_factory=list)


class Violation(Model):
    invariant: str
    detail: str
