"""How a placement record is shown, by ``bodega machine explain`` and ``place --explain``.

Why a machine went where it did: the winner, each region's ranking with its
subscores, every refusal with its reason and every attempt on a worker.
"""

from __future__ import annotations

from typing import Any

from bodega.cli.session import console, table
from bodega.model.capacity import Ask


def show_record(record: dict[str, Any]) -> None:
    winner = record.get("winner") or {}
    console.print(f"[bold]placed on {winner.get('worker', '?')}[/bold] in "
                  f"{winner.get('region', '?')} by {record.get('broker')} "
                  f"({record.get('policy')}, decided in {record.get('duration_ms')} ms); "
                  f"asked for {_asked(record.get('asked'))}")
    for region_record in record.get("regions", []):
        show_region(region_record)
    table(["WORKER", "REGION", "OUTCOME", "MS", "REASON"],
          [(a["worker"], a["region"], a["outcome"], a.get("ms", "-"), a.get("reason", ""))
           for a in record.get("attempts", [])], title="Attempts")


def _asked(asked: Any) -> str:
    try:
        return Ask.from_wire(asked).describe()
    except (AttributeError, KeyError, TypeError, ValueError):
        return str(asked)


def show_region(region: dict[str, Any]) -> None:
    console.print(f"[bold]{region['region']}[/bold]: {region['candidates']} workers, "
                  f"{region['feasible']} feasible, refused {region.get('refused') or 'none'}")
    rows = [(r["worker"], r["score"], " ".join(f"{k}={v}" for k, v in r["subscores"].items()))
            for r in region.get("ranked", [])]
    rows += [(r["worker"], "refused", r["reason"]) for r in region.get("refusals", [])]
    table(["WORKER", "SCORE", "WHY"], rows)
