"""``bodega sim``: compare placement policies on a trace, and check the simulator itself."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError

from bodega.cli.session.errors import friendly
from bodega.sim.compare import CompareSpec, compare, deaths_table, sweep_table, table
from bodega.sim.engine import SimConfig
from bodega.sim.fleet import DEFAULT_FLEET
from bodega.sim.google import GoogleMapping, read_task_events
from bodega.sim.google_machines import read_machine_events
from bodega.sim.jobs import D_SWEPT, SAMPLING, JobSimParams
from bodega.sim.jobs import sweep as jobs_sweep
from bodega.sim.policies import DEFAULT_POLICIES
from bodega.sim.supermarket import (
    SupermarketParams,
    busy_fraction_off,
    busy_tolerance,
    mean_time_error,
)
from bodega.sim.supermarket import simulate as supermarket_simulate
from bodega.sim.trace import Trace
from bodega.sim.workload import WorkloadParams

sim = typer.Typer(help="Simulate placement: compare policies, check the model.",
                  no_args_is_help=True)

F = TypeVar("F", bound=Callable[..., Any])


def one_line(fn: F) -> F:
    """A bad option value as one readable line, not pydantic's multi-line report."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "value"
            raise ValueError(f"{where}: {first['msg']}") from None

    return wrapper  # type: ignore[return-value]


@sim.command("supermarket")
@friendly
@one_line
def supermarket(
    servers: Annotated[int, typer.Option(help="Number of servers n")] = 1000,
    load: Annotated[float, typer.Option(help="Arrivals per server per unit time (0 < λ < 1)")]
    = 0.9,
    choices: Annotated[int, typer.Option(help="Servers sampled per arrival (d)")] = 2,
    jobs: Annotated[int | None, typer.Option(
        help="Jobs measured after the warm-up (default: enough for ±1 % on the mean, "
             "growing like 1/(1-λ)², from 200,000 up to 4,000,000)")] = None,
    warmup: Annotated[int | None, typer.Option(
        help="Jobs run first and not measured (default: none for one choice, whose queues "
             "start stationary; else the arrivals of three relaxation times or ten mean "
             "times in system, whichever is longer)")] = None,
    seed: Annotated[int, typer.Option(help="Random seed")] = 1,
) -> None:
    """Poisson arrivals to n servers, each joining the shortest of d sampled queues."""
    params = SupermarketParams(servers=servers, load=load, choices=choices, jobs=jobs,
                               warmup=warmup, seed=seed)
    run = params.run
    error = mean_time_error(load, choices, servers, run.jobs)
    typer.echo(f"run: {run.warmup:,} warm-up jobs ({'given' if warmup is not None else 'default'}"
               f"), then {run.jobs:,} measured ({'given' if jobs is not None else 'default'}): "
               f"about ±{100 * error:.1f} % on the mean")
    result = supermarket_simulate(params)
    gap = 100 * (result.mean_time / result.expected_time - 1)
    typer.echo(f"mean time in system: {result.mean_time:.4f} (closed form for n -> infinity: "
               f"{result.expected_time:.4f}, {gap:+.2f} %)")
    seen = ", ".join(f"{s:.3f}" for s in result.at_least)
    expected = ", ".join(f"{s:.3f}" for s in result.expected_at_least)
    typer.echo(f"servers with >= 1..{len(result.at_least)} jobs: {seen} (closed form "
               f"{expected})")
    busy, tolerance = result.at_least[0], busy_tolerance(params)
    typer.echo(f"busy fraction: {busy:.4f} (the load {load:.4f}, ±{tolerance:.4f} for a run "
               "long enough)")
    if busy_fraction_off(busy, params):
        typer.secho(f"Warning: the busy fraction is {busy - load:+.4f} off the load, more than "
                    f"±{tolerance:.4f}: the run is too short for the queues to average out, so "
                    "the mean time in system is off too; raise --jobs and --warmup",
                    fg=typer.colors.YELLOW, err=True)


def policy_names(text: str) -> list[str]:
    """Split ``--policies`` at the commas outside brackets: ``fgd[app=1;hole=1],spread``."""
    names, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth <= 0:
            names.append(current)
            current, depth = "", 0
        else:
            current += char
    names.append(current)
    return [name.strip() for name in names if name.strip()]


@sim.command("compare")
@friendly
@one_line
def compare_command(
    out: Annotated[Path, typer.Option(help="Directory for the table, measures and plots")],
    policies: Annotated[str, typer.Option(
        help="Comma-separated: default (the broker's), fgd, utility, hole, binpack, spread, "
             "pow-D, S+pD, random, omniscient; weights in brackets, e.g. "
             "fgd\\[fragmentation=2;app=0.5]")]
    = ",".join(DEFAULT_POLICIES),
    hours: Annotated[float, typer.Option(help="Length of the generated trace")] = 24.0,
    load: Annotated[float, typer.Option(help="Multiple of the default workload's rate")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the workload and of the simulation")] = 7,
    brokers: Annotated[int, typer.Option(help="Brokers placing concurrently")] = 3,
    gossip_delay: Annotated[float, typer.Option(help="Seconds until brokers see a change")]
    = 2.0,
    max_attempts: Annotated[int, typer.Option(help="Workers asked before a create fails")] = 8,
    warmup: Annotated[float, typer.Option(
        help="Seconds from an empty fleet before measuring")] = 3600.0,
    trace: Annotated[Path | None, typer.Option(
        help="A Google 2011 task_events CSV (or .csv.gz) instead of the generated trace")]
    = None,
    machine_events: Annotated[Path | None, typer.Option(
        help="With --trace: the cell's machine_events CSV (or .csv.gz), for its hosts and "
             "when they were out of service, instead of the default fleet")] = None,
    failure_rate: Annotated[float, typer.Option(
        help="Generated trace: host deaths per host per day")] = 0.1,
    sweeps: Annotated[bool, typer.Option(help="Also sweep load, staleness and brokers")]
    = True,
    sweep_hours: Annotated[float, typer.Option(help="Trace length for the sweeps")] = 6.0,
) -> None:
    """Run each policy on the same trace; write table.md, measures.json and plots to --out."""
    from bodega.sim.plots import draw  # matplotlib is slow to import: only when drawing

    if machine_events is not None and trace is None:
        raise ValueError("--machine-events goes with --trace (the same cell's task_events)")
    fleet, loaded = DEFAULT_FLEET, None
    if trace is not None:
        loaded = read_task_events(trace, GoogleMapping())
        if not loaded.arrivals:
            raise ValueError(f"{trace}: no task was ever scheduled in it: nothing to replay")
    if loaded is not None and machine_events is not None:
        cell = read_machine_events(machine_events, GoogleMapping())
        if not cell.fleet.regions:
            raise ValueError(f"{machine_events}: no machine was added at the start of the "
                             "trace: no fleet to replay on")
        fleet = cell.fleet
        loaded = Trace.of(loaded.name, loaded.arrivals, cell.outages)
    spec = CompareSpec(
        policies=tuple(policy_names(policies)),
        workload=WorkloadParams(hours=hours, seed=seed,
                                failure_rate=failure_rate).scaled(load),
        fleet=fleet,
        config=SimConfig(brokers=brokers, gossip_delay=gossip_delay,
                         max_attempts=max_attempts, warmup=warmup, seed=seed),
        sweeps=sweeps, sweep_hours=sweep_hours)
    result = compare(spec, loaded, progress=lambda line: typer.echo(f"  {line}", err=True))
    out.mkdir(parents=True, exist_ok=True)
    text = [f"Trace: {result.trace.name}, {len(result.trace.arrivals)} creates; "
            f"{brokers} brokers, gossip delay {gossip_delay:g} s; measured after {warmup:g} s.",
            "", table(result.measures), "", "Host deaths and creates:", "",
            deaths_table(result.measures)]
    for title, sweep in (("load x", result.by_load), ("delay s", result.by_delay),
                         ("brokers", result.by_brokers)):
        if sweep:
            text += ["", f"By {title}: rejected (with room elsewhere) / times a worker said no "
                     "/ p99 host utilization", "",
                     sweep_table(title, sweep)]
    (out / "table.md").write_text("\n".join(text) + "\n")
    (out / "measures.json").write_text(json.dumps(
        {"spec": spec.model_dump(mode="json"),
         "measures": [m.model_dump() for m in result.measures]}, indent=2) + "\n")
    written = draw(result, out)
    typer.echo(table(result.measures))
    typer.echo(f"wrote {out / 'table.md'}, {out / 'measures.json'} and "
               f"{len(written)} plots to {out}")


@sim.command("jobs")
@friendly
@one_line
def jobs_command(
    workers: Annotated[int, typer.Option(help="Workers, one slot each")] = 1000,
    loads: Annotated[str, typer.Option(help="Comma-separated loads (0 < load < 1)")]
    = "0.8,0.9",
    ds: Annotated[str, typer.Option("--d", help="Comma-separated probe ratios d")]
    = ",".join(str(d) for d in D_SWEPT),
    jobs: Annotated[int, typer.Option(help="Jobs measured after the warm-up")] = 1000,
    seed: Annotated[int, typer.Option(help="Random seed")] = 1,
    plots: Annotated[Path | None, typer.Option(
        help="Also draw the ratios against d as PNGs in this directory")] = None,
) -> None:
    """Sparrow's setup: per-task and batch sampling, late binding, claim mode and an
    omniscient scheduler; median and p99 job response time, and their ratio to the ideal."""
    try:
        load_list = tuple(float(x) for x in loads.split(","))
        d_list = tuple(float(x) for x in ds.split(","))
    except ValueError:
        raise ValueError("--loads and --d take comma-separated numbers") from None
    for load in load_list:
        JobSimParams(load=load)  # checked before anything runs
    params = JobSimParams(workers=workers, jobs=jobs, warmup=max(1, jobs // 5), seed=seed)
    typer.echo(f"{'load':>5} {'scheduler':<13} {'d':>4} {'median s':>9} {'p99 s':>7} "
               f"{'median/ideal':>12} {'p99/ideal':>9}")
    rows = jobs_sweep(params, load_list, d_list)
    for load, result, ideal in rows:
        d = f"{result.d:.1f}" if result.scheduler in SAMPLING else "-"
        typer.echo(f"{load:>5.2f} {result.scheduler:<13} {d:>4} "
                   f"{result.median:>9.3f} {result.p99:>7.3f} "
                   f"{result.median / ideal.median:>12.3f} {result.p99 / ideal.p99:>9.3f}")
    if plots is not None:
        from bodega.sim.plots import draw_jobs  # matplotlib only when asked to draw

        written = draw_jobs(rows, plots)
        typer.echo(f"wrote {', '.join(str(p) for p in written)}")
