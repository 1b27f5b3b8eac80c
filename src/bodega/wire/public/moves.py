"""``POST /v1/apps/{app}/machines/{id}/move``, a bodega extension: its body.

The machine keeps its id, app, name, config, metadata and history; its worker changes
(``worker/core/moves.py``). The answer is the Machine as ``GET`` answers it, on its new
worker.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

MOVE_TIMEOUT = 150.0  # a client's wait: the stop honours the machine's stop_config


class MoveMachineRequest(BaseModel):
    """Where to: one worker, or any other worker of a region (the machine's own when
    neither is given), chosen by placement's ranking, cordoned workers left out."""

    model_config = ConfigDict(extra="forbid")

    worker: str | None = Field(default=None, min_length=1, max_length=128)
    region: str | None = Field(default=None, min_length=1, max_length=64)
    reason: str | None = Field(default=None, max_length=500)

    @model_validator(mode="after")
    def _one_target(self) -> MoveMachineRequest:
        if self.worker is not None and self.region is not None:
            raise ValueError("give worker or region, not both")
        return self
