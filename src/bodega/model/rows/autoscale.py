"""The autoscaler's two rows: an app's setting (``autoscale``) and its last run
(``autoscale_runs``), each keyed by the app's name.

The setting is written by any broker the API reaches (last writer wins: two clients
setting one app's bounds in the same instant keep one of the two, whole). The run is
written by the broker that evaluates the app: the lease it holds (its name and a beat
that rises at each evaluation, which the other brokers watch), the last decision and
why, and what the next evaluation must remember (machines draining, when the wanted
count first fell). ``broker/autoscale/`` reads and writes both; docs/metrics.md says
the rules.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from bodega.model.rows.row import Row


class AutoscaleRow(Row):
    """An app's bounds and its target: a concurrency per machine, or a PromQL expression
    whose value is the wanted count of machines."""

    TABLE: ClassVar[str] = "autoscale"

    app: str
    min: int
    max: int
    concurrency: float | None = None  # sessions per started machine the app wants
    expr: str | None = None  # PromQL: its value is the wanted count
    scale_in_after: float = 30.0  # seconds the wanted count must stay lower before a stop
    updated_at: str = ""

    @property
    def mode(self) -> str:
        return "expr" if self.expr else "concurrency"


class Decision(BaseModel):
    """One evaluation's outcome: how many machines it wants and what it does for them."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    wanted: int
    serving: int  # started (or starting) and not cordoned, when it looked
    figure: str  # what it read: "8 sessions over 1 machine (target 2 a machine)"
    reason: str  # why it does what it does, or nothing
    start: tuple[str, ...] = ()  # stopped machines it starts (newest release first)
    create: int = 0  # clones of the newest machine it creates
    uncordon: tuple[str, ...] = ()  # draining machines it takes back into rotation
    cordon: tuple[str, ...] = ()  # machines it takes out of rotation, to stop once drained
    stop: tuple[str, ...] = ()  # drained machines it stops
    at: float = 0.0  # wall-clock seconds


class Memory(BaseModel):
    """What one evaluation leaves the next: scale-in's window and the machines draining."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    below_since: float | None = None  # when the wanted count first fell below serving
    peak_since: int = 0  # the highest wanted count seen since then
    draining: dict[str, float] = {}  # machine id -> when it was cordoned to scale in
    last_out: float | None = None  # when it last started or created
    last_in: float | None = None  # when it last stopped


class AutoscaleRunRow(Row):
    """The evaluator's lease on an app and its last decision."""

    TABLE: ClassVar[str] = "autoscale_runs"

    app: str
    holder: str  # the broker evaluating the app
    beat: int = 0  # rises at each evaluation: a beat that stops rising is a lease let go
    ttl: float = 10.0  # seconds without a new beat after which another broker takes over
    decision: Decision | None = None
    memory: Memory = Memory()
    error: str | None = None  # what the last actions could not do
