"""What a run is judged by: rejections, hot spots, spread of load, exposure, decision time.

All over the samples a run took (every ``sample_every`` seconds, after
``warmup``), with host utilization the busier of cpu and memory:

- ``rejected``: creates that found no worker to say yes (a 412 to the client);
  ``rejected_with_room``: of those, the ones for which some host in the region
  had room at that moment (lost to stale views, races or too few attempts).
- ``refusals``: times a worker said no to a broker that thought it had room.
- ``p99_utilization``, ``max_utilization``: over every (host, sample) pooled;
  ``p99_over_time``: each sample's p99 across hosts, averaged over samples
  (lower for a policy whose hot spots come only at the daily peak).
- ``hosts_above_90``: hosts above 90 % utilization, on average per sample.
- ``cv``: coefficient of variation (std / mean) of host utilization, averaged
  over samples: 0 is perfectly even load.
- ``death_mean``, ``death_p99``, ``death_max``: running machines a host's death
  takes down, over hosts and samples. The mean is the same for every policy
  that places the same machines (machines / hosts); the tail is what a policy
  changes. ``death_unprotected``: the mean with no standby on another host.
- ``decision_us``: CPU time of the ranking (``rank_region`` and the attempts it
  scored) per placement, mean, in microseconds: a measurement, not a model.

Over the whole run (deaths are counted whenever they fall):

- ``host_deaths``, ``machines_lost``: hosts that died and the machines they took
  down; ``takeovers``: lost machines whose standby started on its own host,
  ``takeovers_failed``: standbys that could not (their host full or dead);
  ``recreated``, ``recreates_rejected``: the rest, created again elsewhere (a
  rejected re-create is also in ``rejected``).
- ``unreachable``: times a broker asked a dead host it still believed alive.
- ``create_p50``, ``create_p99``: seconds from the yes to running (start, plus the
  pull on a host without the image); ``pulled``: the share of creates that pulled.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from bodega.sim.engine import RunResult

HOT = 0.9


class Measures(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: str
    creates: int
    placed: int
    rejected: int
    rejected_with_room: int
    refusals: int
    standbys_rejected: int
    p99_utilization: float
    p99_over_time: float
    max_utilization: float
    mean_utilization: float
    hosts_above_90: float
    cv: float
    death_mean: float
    death_p99: float
    death_max: int
    death_unprotected: float
    decision_us: float
    host_deaths: int = 0
    machines_lost: int = 0
    takeovers: int = 0
    takeovers_failed: int = 0
    recreated: int = 0
    recreates_rejected: int = 0
    unreachable: int = 0
    create_p50: float = 0.0
    create_p99: float = 0.0
    pulled: float = 0.0

    @property
    def rejection_rate(self) -> float:
        return self.rejected / self.creates if self.creates else 0.0


def measure(result: RunResult) -> Measures:
    samples = result.samples
    if samples:
        utilization = np.stack([s.utilization for s in samples])
        machines = np.stack([s.machines for s in samples])
        unprotected = np.stack([s.unprotected for s in samples])
    else:  # a run shorter than its warm-up: nothing was sampled
        utilization = np.zeros((1, len(result.hosts)))
        machines = unprotected = np.zeros((1, len(result.hosts)), dtype=np.int64)
    created = np.array(result.create_seconds)
    return Measures(
        policy=result.policy, creates=result.creates, placed=result.placed,
        rejected=result.rejected, rejected_with_room=result.rejected_with_room,
        refusals=result.refusals, standbys_rejected=result.standbys_rejected,
        p99_utilization=float(np.percentile(utilization, 99)),
        p99_over_time=float(np.percentile(utilization, 99, axis=1).mean()),
        max_utilization=float(utilization.max()),
        mean_utilization=float(utilization.mean()),
        hosts_above_90=float(hot_hosts(utilization).mean()),
        cv=float(np.mean(coefficient_of_variation(utilization))),
        death_mean=float(machines.mean()), death_p99=float(np.percentile(machines, 99)),
        death_max=int(machines.max()),
        death_unprotected=float(unprotected.mean()),
        decision_us=float(np.mean(result.decision_seconds) * 1e6)
        if result.decision_seconds else 0.0,
        host_deaths=result.host_deaths, machines_lost=result.machines_lost,
        takeovers=result.takeovers, takeovers_failed=result.takeovers_failed,
        recreated=result.recreated, recreates_rejected=result.recreates_rejected,
        unreachable=result.unreachable,
        create_p50=float(np.percentile(created, 50)) if len(created) else 0.0,
        create_p99=float(np.percentile(created, 99)) if len(created) else 0.0,
        pulled=result.pulls / len(created) if len(created) else 0.0,
    )


def hot_hosts(utilization: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Per sample (row): how many hosts are above ``HOT`` (``hosts_above_90``)."""
    counts: npt.NDArray[np.int64] = (utilization > HOT).sum(axis=1)
    return counts


def coefficient_of_variation(utilization: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per sample (row): std / mean across hosts; 0 for a sample with nothing running."""
    mean = utilization.mean(axis=1)
    std = utilization.std(axis=1)
    out = np.zeros(len(mean))
    np.divide(std, mean, out=out, where=mean > 0)
    return out


def series(result: RunResult) -> dict[str, npt.NDArray[np.float64]]:
    """Per-sample time series for plots: time (hours), mean, p99 and max utilization."""
    if not result.samples:
        empty = np.zeros(0)
        return {"hours": empty, "mean": empty, "p99": empty, "max": empty}
    utilization = np.stack([s.utilization for s in result.samples])
    return {
        "hours": np.array([s.time / 3600 for s in result.samples]),
        "mean": utilization.mean(axis=1),
        "p99": np.percentile(utilization, 99, axis=1),
        "max": utilization.max(axis=1),
    }


def utilizations(result: RunResult) -> npt.NDArray[np.float64]:
    """Every (host, sample) utilization: what a CDF of host utilization is drawn from."""
    if not result.samples:
        return np.zeros(0)
    return np.concatenate([s.utilization for s in result.samples])
