"""Every policy on the same trace, side by side, and how they move with load, staleness
and the number of brokers.

    trace ──▶ simulate(policy) for each policy ──▶ Measures ──▶ table
    the workload at each load ─────────────────▶ rejections against load
    the sweep trace at each gossip delay, each broker count ─▶ races and rejections

The sweeps use a shorter trace (``sweep_hours``) so that a full comparison
stays a few minutes of CPU; the main table uses the whole trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from bodega.sim.engine import RunResult, SimConfig, simulate
from bodega.sim.fleet import DEFAULT_FLEET, FleetSpec
from bodega.sim.measures import Measures, measure
from bodega.sim.policies import DEFAULT_POLICIES, named
from bodega.sim.trace import Trace
from bodega.sim.workload import WorkloadParams, generate


class CompareSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    policies: tuple[str, ...] = DEFAULT_POLICIES
    workload: WorkloadParams = WorkloadParams()
    fleet: FleetSpec = DEFAULT_FLEET
    config: SimConfig = SimConfig()
    loads: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)  # multiples of the workload's rate
    delays: tuple[float, ...] = (0.0, 5.0, 30.0)  # gossip delays, seconds
    broker_counts: tuple[int, ...] = (1, 3, 10)
    sweep_hours: float = Field(default=6.0, gt=0)
    sweeps: bool = True


@dataclass
class Comparison:
    spec: CompareSpec
    trace: Trace
    results: dict[str, RunResult] = field(default_factory=dict)
    measures: list[Measures] = field(default_factory=list)
    # (sweep value, measures) per policy
    by_load: dict[str, list[tuple[float, Measures]]] = field(default_factory=dict)
    by_delay: dict[str, list[tuple[float, Measures]]] = field(default_factory=dict)
    by_brokers: dict[str, list[tuple[float, Measures]]] = field(default_factory=dict)


Progress = Callable[[str], None]


def compare(spec: CompareSpec, trace: Trace | None = None,
            progress: Progress | None = None) -> Comparison:
    """Run every policy; with ``trace`` given (a loaded one) there is no load sweep."""
    say = progress or (lambda _line: None)
    policies = [named(p, spec.config.seed) for p in spec.policies]  # bad names fail first
    main = trace or generate(spec.workload, spec.fleet)
    out = Comparison(spec, main)
    for policy in policies:
        say(f"{policy.name}: {len(main.arrivals)} creates")
        result = simulate(main, spec.fleet, policy, spec.config)
        out.results[policy.name] = result
        out.measures.append(measure(result))
    if not spec.sweeps:
        return out
    short = spec.workload.model_copy(update={"hours": min(spec.sweep_hours,
                                                          spec.workload.hours)})
    sweep_trace = generate(short, spec.fleet) if trace is None else main
    for policy in policies:
        name = policy.name
        if trace is None:
            for load in spec.loads:
                say(f"{name}: load x{load:g}")
                out.by_load.setdefault(name, []).append((load, measure(simulate(
                    generate(short.scaled(load), spec.fleet), spec.fleet, policy,
                    spec.config))))
        for delay in spec.delays:
            say(f"{name}: gossip delay {delay:g} s")
            config = spec.config.model_copy(update={"gossip_delay": delay})
            out.by_delay.setdefault(name, []).append(
                (delay, measure(simulate(sweep_trace, spec.fleet, policy, config))))
        for brokers in spec.broker_counts:
            say(f"{name}: brokers {brokers}")
            config = spec.config.model_copy(update={"brokers": brokers})
            out.by_brokers.setdefault(name, []).append(
                (float(brokers), measure(simulate(sweep_trace, spec.fleet, policy, config))))
    return out


def table(measures: list[Measures]) -> str:
    """The comparison as a Markdown table, one row per policy."""
    head = ("| policy | rejected | with room elsewhere | worker said no | p99 host util "
            "| p99 per sample, mean | max | hosts > 90 % | CV "
            "| machines lost per host death p99 (max) | decision µs |")
    rows = [head, "|" + "---|" * 11]
    for m in measures:
        rows.append(
            f"| {m.policy} | {m.rejected} ({100 * m.rejection_rate:.2f} %) "
            f"| {m.rejected_with_room} | {m.refusals} | {m.p99_utilization:.3f} "
            f"| {m.p99_over_time:.3f} | {m.max_utilization:.3f} | {m.hosts_above_90:.2f} "
            f"| {m.cv:.3f} "
            f"| {m.death_p99:.0f} ({m.death_max}) | {m.decision_us:.0f} |")
    return "\n".join(rows)


def deaths_table(measures: list[Measures]) -> str:
    """Host deaths and the time creates take, as a Markdown table, one row per policy."""
    head = ("| policy | host deaths | machines lost | standbys took over (could not) "
            "| created again (rejected) | asks to a dead host | create s p50 / p99 | pulled |")
    rows = [head, "|" + "---|" * 8]
    for m in measures:
        rows.append(
            f"| {m.policy} | {m.host_deaths} | {m.machines_lost} | {m.takeovers} "
            f"({m.takeovers_failed}) | {m.recreated} ({m.recreates_rejected}) "
            f"| {m.unreachable} | {m.create_p50:.0f} / {m.create_p99:.0f} "
            f"| {100 * m.pulled:.1f} % |")
    return "\n".join(rows)


def sweep_table(title: str, sweep: dict[str, list[tuple[float, Measures]]]) -> str:
    """Per policy and sweep value: rejected (of which with room elsewhere), times a worker
    said no, p99 host utilization; as a Markdown table."""
    if not sweep:
        return ""
    values = [v for v, _ in next(iter(sweep.values()))]
    rows = ["| policy | " + " | ".join(f"{title} {v:g}" for v in values) + " |",
            "|" + "---|" * (len(values) + 1)]
    for policy, points in sweep.items():
        cells = [f"{m.rejected} ({m.rejected_with_room}) / {m.refusals} / "
                 f"{m.p99_utilization:.2f}" for _, m in points]
        rows.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
