"""The autoscaler on the wire (a bodega extension): ``PUT /v1/apps/{app}/autoscale`` takes
a ``SetAutoscale`` (strict), ``GET`` answers ``Autoscale``: the setting, who evaluates the
app and its last decision."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bodega.model.answer import Answer
from bodega.model.rows.autoscale import Decision

MAX_MACHINES = 1000


class SetAutoscale(BaseModel):
    """Bounds and one target: a concurrency per machine, or a PromQL expression whose value
    is the wanted count (as fly-autoscaler's ``FAS_EXPR``)."""

    model_config = ConfigDict(extra="forbid")

    min: int = Field(ge=0, le=MAX_MACHINES)
    max: int = Field(ge=1, le=MAX_MACHINES)
    concurrency: float | None = Field(default=None, ge=0.01, le=1_000_000)
    expr: str | None = Field(default=None, min_length=1, max_length=4096)
    scale_in_after: float = Field(default=30.0, ge=0, le=3600)

    @model_validator(mode="after")
    def _one_target(self) -> SetAutoscale:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        if (self.concurrency is None) == (self.expr is None):
            raise ValueError("give one target: concurrency (sessions per machine) or expr "
                             "(a PromQL expression giving the wanted count)")
        return self


class AutoscaleSetting(Answer):
    min: int
    max: int
    concurrency: float | None = None
    expr: str | None = None
    scale_in_after: float = 30.0
    updated_at: str = ""


class Autoscale(Answer):
    app: str
    setting: AutoscaleSetting
    evaluator: str | None = None  # the broker holding the app's autoscale lease
    decision: Decision | None = None  # its last one, and why
    draining: list[str] = []  # machines cordoned to scale in, stopped once drained
    error: str | None = None  # what its last actions could not do
