"""Why a machine is where it is: the record a placement leaves, on the wire and at rest.

One model from end to end: the broker's placer builds it (``broker/placing/core/record.py``),
the create carries it to the worker (``CreateMachineBody.placement``), the worker keeps
it with the machine as the JSON it arrived as, ``GET .../placement`` answers it, and
``bodega machine explain`` shows it (``cli/commands/placement_report.py``). Each region's
ranking is ``placement/rank.py``'s ``explain()``; a simulated placement
(``POST /v1/platform/placements`` with ``explain``) answers the same per region.
"""

from __future__ import annotations

from pydantic import ConfigDict

from bodega.model.answer import Answer


class _Part(Answer):
    # Kept as JSON and served back as JSON, which has no NaN or Infinity: refused on the
    # way in (a clear 400 naming the field), never stored as null.
    model_config = ConfigDict(allow_inf_nan=False)


class Refusal(_Part):
    worker: str
    reason: str = ""


class Ranked(_Part):
    worker: str
    score: float
    subscores: dict[str, float] = {}


class RegionExplanation(_Part):
    """One region's ranking of a request, as the placement pipeline explains it."""

    region: str
    candidates: int = 0
    feasible: int = 0
    refused: dict[str, int] = {}  # refusals counted by kind
    refusals: list[Refusal] = []  # the first few, by name, with their reason
    ranked: list[Ranked] = []  # the top few, with their subscores
    sampled: int | None = None  # d, when the ranking sampled (power of d choices)


class Asked(_Part):
    """What a placement asked for (``model.capacity.Ask`` on the wire)."""

    cpu_kind: str = "shared"
    cpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0
    gpus: int = 0
    gpu_kind: str | None = None


class PlacementAttempt(_Part):
    worker: str
    region: str
    outcome: str  # accepted, rejected, unreachable
    ms: float | None = None
    reason: str | None = None


class Winner(Ranked):
    region: str = ""


class PlacementRecord(_Part):
    """Why a machine is where it is (``GET .../placement``): the record its placement left
    (``broker/placing/core/record.py``), kept by the worker with the machine."""

    policy: str = ""
    asked: Asked = Asked()
    regions_asked: list[str] = []
    broker: str = ""
    at: str = ""
    duration_ms: float = 0.0
    regions: list[RegionExplanation] = []
    attempts: list[PlacementAttempt] = []
    winner: Winner | None = None
