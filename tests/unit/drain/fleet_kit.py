"""Facts for the drain and rebalance planners: workers and machines made by hand."""

from __future__ import annotations

from dataclasses import replace

from bodega.drain.core.facts import Fleet, Unit
from bodega.model.capacity import Ask, Totals, Usage
from bodega.placement.request import Candidate

SMALL = Ask(cpus=1, memory_mb=256)


def worker(name: str, region: str = "ams", cpus: int = 4, memory_mb: int = 2048,
           used_mb: int = 0, status: str = "alive", cordoned: bool = False,
           reason: str = "") -> Candidate:
    totals = Totals(cpus=cpus, memory_mb=memory_mb, disk_gb=10, shared_cpu_ratio=1.0)
    return Candidate(name=name, region=region, url=f"http://{name}", totals=totals,
                     used=Usage(memory_mb=used_mb), cordoned=cordoned, cordon_reason=reason,
                     status=status)


def unit(id: str, app: str, on: str, state: str = "started", ask: Ask = SMALL,
         healthy: bool | None = None, region: str = "ams",
         standby_for: tuple[str, ...] = ()) -> Unit:
    return Unit(id=id, app=app, worker=on, region=region, state=state, ask=ask,
                healthy=state == "started" if healthy is None else healthy,
                standby_for=standby_for)


def fleet(workers: list[Candidate], units: list[Unit], keep: dict[str, int] | None = None
          ) -> Fleet:
    """Workers with the started units' compute (and every unit's disk) counted as used."""
    used = {w.name: w.used for w in workers}
    for u in units:
        w = next(w for w in workers if w.name == u.worker)
        used[w.name] = used[w.name].plus(w.totals, u.ask, compute=u.started)
    return Fleet(workers=tuple(replace(w, used=used[w.name]) for w in workers),
                 units=tuple(units), keep=keep or {})
