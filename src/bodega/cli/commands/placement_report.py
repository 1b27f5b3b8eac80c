"""How a placement record is shown, by ``bodega machine explain`` and ``place --explain``.

Why a machine went where it did: the winner, each region's ranking with its
subscores, every refusal with its reason and every attempt on a worker.
"""

from __future__ import annotations

from bodega.cli.session.api import console, table
from bodega.model.capacity import Ask
from bodega.wire.public.placement import Asked, PlacementRecord, RegionExplanation


def show_record(record: PlacementRecord) -> None:
    winner = record.winner
    console.print(f"[bold]placed on {winner.worker if winner else '?'}[/bold] in "
                  f"{winner.region if winner else '?'} by {record.broker} "
                  f"({record.policy}, decided in {record.duration_ms} ms); "
                  f"asked for {_asked(record.asked)}")
    for region_record in record.regions:
        show_region(region_record)
    table(["WORKER", "REGION", "OUTCOME", "MS", "REASON"],
          [(a.worker, a.region, a.outcome, "-" if a.ms is None else a.ms,
            a.reason or "") for a in record.attempts], title="Attempts")


def _asked(asked: Asked) -> str:
    return Ask(cpu_kind=asked.cpu_kind, cpus=asked.cpus, memory_mb=asked.memory_mb,
               disk_gb=asked.disk_gb, gpus=asked.gpus, gpu_kind=asked.gpu_kind).describe()


def show_region(region: RegionExplanation) -> None:
    console.print(f"[bold]{region.region}[/bold]: {region.candidates} workers, "
                  f"{region.feasible} feasible, refused {region.refused or 'none'}")
    rows = [(r.worker, str(r.score), " ".join(f"{k}={v}" for k, v in r.subscores.items()))
            for r in region.ranked]
    rows += [(r.worker, "refused", r.reason) for r in region.refusals]
    table(["WORKER", "SCORE", "WHY"], rows)
