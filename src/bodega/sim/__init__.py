"""bodega.sim: a trace-driven simulator of placement that runs bodega's own ranking code.

Pure: no sockets, no sleeps, no asyncio; deterministic under a seed. Regions
of heterogeneous hosts (``fleet``), a trace of arrivals and host deaths
(``workload`` makes Fly-like ones, ``google`` and ``google_machines`` load
Google's 2011 task and machine events), brokers placing concurrently through
views a gossip delay old (``engine``, ``views``), hosts dying and what
follows (``deaths``), the policies compared (``policies``), what is measured
(``measures``), the comparison and its sweeps (``compare``), and the
supermarket model as a check of the queueing arithmetic (``supermarket``).
Plots live in ``plots``, the only module that imports matplotlib.
"""

from bodega.sim.compare import CompareSpec, Comparison, compare, sweep_table, table
from bodega.sim.engine import RunResult, SimConfig, simulate
from bodega.sim.fleet import DEFAULT_FLEET, FleetSpec, HostShape, RegionSpec, SimHost, build_hosts
from bodega.sim.google import GoogleMapping, TraceFormatError, read_task_events
from bodega.sim.google_machines import GoogleFleet, read_machine_events
from bodega.sim.measures import Measures, measure, series, utilizations
from bodega.sim.policies import DEFAULT_POLICIES, SimPolicy, named, with_seed
from bodega.sim.supermarket import SupermarketParams, SupermarketResult
from bodega.sim.trace import Arrival, Outage, Trace
from bodega.sim.workload import WorkloadParams, generate

__all__ = [
    "DEFAULT_FLEET",
    "DEFAULT_POLICIES",
    "Arrival",
    "CompareSpec",
    "Comparison",
    "FleetSpec",
    "GoogleFleet",
    "GoogleMapping",
    "HostShape",
    "Measures",
    "Outage",
    "RegionSpec",
    "RunResult",
    "SimConfig",
    "SimHost",
    "SimPolicy",
    "SupermarketParams",
    "SupermarketResult",
    "Trace",
    "TraceFormatError",
    "WorkloadParams",
    "build_hosts",
    "compare",
    "generate",
    "measure",
    "named",
    "read_machine_events",
    "read_task_events",
    "series",
    "simulate",
    "sweep_table",
    "table",
    "utilizations",
    "with_seed",
]
