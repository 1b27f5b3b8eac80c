"""A Fly-like workload: many small apps, a heavy tail of sizes, a daily cycle, bursts.

Every parameter is a field of ``WorkloadParams`` (documented in
docs/scheduling.md); the same parameters and seed always give the same trace.

- **Apps**: ``apps`` apps, each with one machine size and one home region.
  Sizes are Fly's presets, drawn with ``SIZES``' weights: most apps are
  shared-cpu-1x with 256 MB to 1 GB, a few are performance-8x or 16x (the
  heavy tail that makes big holes matter).
- **Steady creates**: a Poisson process whose rate follows the day,
  ``rate * (1 + diurnal * sin(2 pi t / day))``; each create belongs to an
  app drawn by Zipf popularity (exponent ``zipf``): a few busy apps, a long
  tail of quiet ones. A machine lives a lognormal time (median
  ``lifetime_median`` seconds, shape ``lifetime_sigma``): most minutes, some days.
- **Scale from zero**: at rate ``burst_rate`` an app (uniformly chosen) wakes
  and creates ``burst_min``..``burst_max`` machines within ``burst_window``
  seconds, which live an exponential time of mean ``burst_lifetime``.
- **Standbys**: a fraction ``standby_fraction`` of steady creates also ask
  for a stopped standby on another host.
- **Host deaths**: each host of the fleet dies at rate ``failure_rate`` per
  day (a Poisson process) and is back, empty, an exponential time of mean
  ``repair_mean`` seconds later (at least ``min_repair``). Drawn from a
  random stream of their own, so the arrivals of a seed are the same with
  or without deaths, and the same at every load.
"""

from __future__ import annotations

import math
import random
from itertools import accumulate

from pydantic import BaseModel, ConfigDict, Field

from bodega.sim.fleet import DEFAULT_FLEET, FleetSpec, build_hosts
from bodega.sim.trace import Arrival, Outage, Trace

DAY = 86400.0

# (cpu kind, cpus, memory MB, weight): Fly's machine presets, small ones far more common.
SIZES: tuple[tuple[str, int, int, float], ...] = (
    ("shared", 1, 256, 0.30), ("shared", 1, 512, 0.20), ("shared", 1, 1024, 0.15),
    ("shared", 2, 2048, 0.10), ("shared", 4, 4096, 0.08), ("shared", 8, 8192, 0.05),
    ("performance", 1, 2048, 0.05), ("performance", 2, 4096, 0.03),
    ("performance", 4, 8192, 0.02), ("performance", 8, 16384, 0.015),
    ("performance", 16, 32768, 0.005),
)


class WorkloadParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hours: float = Field(default=24.0, gt=0)
    regions: tuple[str, ...] = ("ams", "iad")
    apps: int = Field(default=500, ge=1)
    rate: float = Field(default=0.3, gt=0)  # steady creates per second, averaged over a day
    diurnal: float = Field(default=0.6, ge=0, le=1)  # swing of the rate around its mean
    zipf: float = Field(default=1.1, ge=0)  # app popularity: share of app k is 1 / k^zipf
    lifetime_median: float = Field(default=2400.0, gt=0)  # seconds
    lifetime_sigma: float = Field(default=1.4, ge=0)
    burst_rate: float = Field(default=1 / 600, ge=0)  # scale-from-zero bursts per second
    burst_min: int = Field(default=3, ge=1)
    burst_max: int = Field(default=24, ge=1)
    burst_window: float = Field(default=10.0, gt=0)  # seconds a burst's creates spread over
    burst_lifetime: float = Field(default=600.0, gt=0)  # mean seconds a burst machine lives
    standby_fraction: float = Field(default=0.1, ge=0, le=1)
    # Far above a real fleet's rate, so that one day shows a few deaths on 68 hosts.
    failure_rate: float = Field(default=0.1, ge=0)  # deaths per host per day
    repair_mean: float = Field(default=3600.0, gt=0)  # seconds until a dead host is back
    min_repair: float = Field(default=60.0, gt=0)
    seed: int = 7

    def scaled(self, load: float) -> WorkloadParams:
        """The same workload with ``load`` times the creates (steady and bursts)."""
        return self.model_copy(update={"rate": self.rate * load,
                                       "burst_rate": self.burst_rate * load})


def generate(params: WorkloadParams | None = None, fleet: FleetSpec = DEFAULT_FLEET) -> Trace:
    """The trace of ``params`` on ``fleet`` (whose hosts are the ones that die)."""
    p = params or WorkloadParams()
    rng = random.Random(p.seed)
    sizes = rng.choices(SIZES, [w for *_, w in SIZES], k=p.apps)
    homes = [p.regions[rng.randrange(len(p.regions))] for _ in range(p.apps)]
    popularity = list(accumulate(1.0 / (k + 1) ** p.zipf for k in range(p.apps)))
    end = p.hours * 3600.0
    arrivals: list[Arrival] = []

    def arrival(at: float, app: int, lifetime: float, standby: bool) -> Arrival:
        kind, cpus, memory, _ = sizes[app]
        return Arrival(time=at, app=f"app-{app:04d}", region=homes[app], cpu_kind=kind,
                       cpus=cpus, memory_mb=memory, lifetime=lifetime, standby=standby)

    # Steady creates: a Poisson process thinned to the daily curve.
    peak = p.rate * (1 + p.diurnal)
    at = rng.expovariate(peak)
    while at < end:
        if rng.random() * peak < p.rate * (1 + p.diurnal * math.sin(2 * math.pi * at / DAY)):
            app = rng.choices(range(p.apps), cum_weights=popularity)[0]
            lifetime = max(1.0, rng.lognormvariate(math.log(p.lifetime_median),
                                                   p.lifetime_sigma))
            arrivals.append(arrival(at, app, lifetime, rng.random() < p.standby_fraction))
        at += rng.expovariate(peak)
    # Scale-from-zero bursts: one app, many machines at once, short-lived.
    at = rng.expovariate(p.burst_rate) if p.burst_rate else end
    while at < end:
        app = rng.randrange(p.apps)
        for _ in range(rng.randint(p.burst_min, max(p.burst_min, p.burst_max))):
            start = at + rng.uniform(0, p.burst_window)
            arrivals.append(arrival(min(start, end), app,
                                    max(1.0, rng.expovariate(1 / p.burst_lifetime)), False))
        at += rng.expovariate(p.burst_rate)
    return Trace.of(f"fly-like seed={p.seed}", arrivals, outages(p, fleet))


def outages(p: WorkloadParams, fleet: FleetSpec) -> list[Outage]:
    """Every host's deaths over the trace: Poisson at ``failure_rate`` a day, one at a time."""
    rng = random.Random(p.seed * 7919 + 1)  # a stream of its own: arrivals do not move
    end = p.hours * 3600.0
    out: list[Outage] = []
    if not p.failure_rate:
        return out
    rate = p.failure_rate / DAY
    for host in build_hosts(fleet):
        at = rng.expovariate(rate)
        while at < end:
            down = max(p.min_repair, rng.expovariate(1 / p.repair_mean))
            out.append(Outage(time=at, host=host.name, duration=down))
            at += down + rng.expovariate(rate)
    return out
