"""``bodega host ls|drain|undrain`` and ``bodega cluster rebalance``: emptying a host before
its maintenance, and evening out a fleet that grew lopsided.

Both run here, on the client, as a deploy does: the broker cordons the host's workers for
the drain (``/v1/cluster/hosts/{name}/drain``) and lists every machine with its worker
(``/v1/cluster/machines``); the plan is the pure planners' (``drain/core``); each move is
one call of the move route, walked one machine at a time (``drain/steps.py``). A drain
stopped half way (Ctrl-C, a lost laptop) leaves the host cordoned for the drain: running
``bodega host drain`` again plans what is left.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, table
from bodega.cli.session.errors import friendly

if TYPE_CHECKING:
    from bodega.drain.core.plan import Move, Stuck
    from bodega.drain.core.report import Report
    from bodega.drain.steps import Progress, Walk
    from bodega.wire.public.machines_client import MachinesClient
    from bodega.wire.public.platform import WorkerStatus

R = TypeVar("R", bound="Report")

host = typer.Typer(help="Drain a host before maintenance (its machines moved off), and "
                   "undrain it.", no_args_is_help=True)

DryRun = Annotated[bool, typer.Option("--dry-run", help="Print each machine's target and why; "
                                      "change nothing")]


def drain_label(w: WorkerStatus) -> str:
    if not w.cordoned:
        return "-"
    return w.cordon_reason or "cordoned"


@host.command("ls")
@friendly
def ls(api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
       json: Json = False) -> None:
    """Hosts and their workers: status, drain, machines and room."""
    found = call(api_url, token, lambda c: c.hosts(), context=context)
    if json:
        typer.echo(jsonlib.dumps([w.model_dump(mode="json", exclude_none=True) for w in found],
                                 indent=2))
        return
    rows = []
    for w in sorted(found, key=lambda w: (w.host or w.name, w.name)):
        used = f"{w.used.memory_mb}/{w.totals.memory_mb} MB" if w.used and w.totals else "-"
        rows.append((w.host or w.name, w.name, w.region or "-", w.status, drain_label(w),
                     w.machines or 0, used))
    table(["HOST", "WORKER", "REGION", "STATUS", "DRAIN", "MACHINES", "MEMORY"], rows)


def show(report: Report) -> None:
    typer.echo(jsonlib.dumps(report.model_dump(mode="json", by_alias=True), indent=2))


def show_moves(moves: list[Move], stuck: list[Stuck]) -> None:
    if moves:
        table(["MACHINE", "APP", "STATE", "FROM", "TO", "WHY"],
              [(m.unit.id, m.unit.app, m.unit.state, m.unit.worker, m.target,
                m.why + ("; its app is unserved while it moves" if m.interrupts else ""))
               for m in moves])
    if stuck:
        typer.echo("")
        table(["STUCK", "APP", "STATE", "WORKER", "WHY"],
              [(s.unit.id, s.unit.app, s.unit.state, s.unit.worker, s.why) for s in stuck])


def progress_line(p: Progress) -> str:
    unit = p.move.unit
    said = f"failed: {p.error}" if p.error else "done"
    return (f"[{p.done}/{p.total}] {unit.label} {unit.worker} -> {p.move.target}: {said} in "
            f"{p.seconds:.1f} s" + (f" (ETA {p.eta:.0f} s)" if p.done < p.total else ""))


def heard(json: bool) -> Callable[[Progress], None]:
    def told(p: Progress) -> None:
        typer.echo(progress_line(p), err=json)
    return told


@host.command("drain")
@friendly
def drain(name: Annotated[str, typer.Argument(help="A host (bodega host ls), or one worker")],
          dry_run: DryRun = False,
          force: Annotated[bool, typer.Option(
              "--force", help="Move machines even where their app goes under its "
              "min_machines_running while they move")] = False,
          api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
          json: Json = False) -> None:
    """Cordon a host's workers (placement refuses them: draining) and move every machine
    off, one at a time, each app kept served where it has another machine; standbys stay
    standbys. --dry-run prints the plan and changes nothing."""
    from bodega.drain.core.report import DrainReport, PlannedMove, StuckMachine

    async def work(client: MachinesClient) -> DrainReport:
        from bodega.drain.core.facts import fleet_of, named
        from bodega.drain.core.plan import plan_drain
        from bodega.drain.steps import ApiMover, walk
        from bodega.model.errors import NotFound

        workers = await client.hosts()
        chosen = named(workers, name)
        if not chosen:
            raise NotFound(f"not_found: no worker or host named {name!r} (bodega host ls "
                           "lists them)")
        if not dry_run:
            await client.drain_host(name, True)
        fleet = fleet_of(workers, await client.cluster_machines())
        plan = plan_drain(fleet, [w.name for w in chosen], force=force)
        report = DrainReport(name=name, workers=list(plan.drained), dry_run=dry_run,
                             moves=[PlannedMove.of(m) for m in plan.moves],
                             stuck=[StuckMachine.of(s) for s in plan.stuck])
        if not json:
            typer.echo(f"{'would drain' if dry_run else 'draining'} {', '.join(plan.drained)}"
                       f": {len(plan.moves)} machine(s) to move, {len(plan.stuck)} stuck")
            show_moves(list(plan.moves), list(plan.stuck))
        if dry_run or not plan.moves:
            return report
        done = await walk(plan.moves, ApiMover(client), f"drain of {name}", heard(json))
        return finished(report, done)

    report = call(api_url, token, work, context=context)
    if json:
        show(report)
    elif not report.dry_run:
        typer.echo(f"moved {report.moved} of {len(report.moves)} in {report.seconds:.1f} s"
                   + (f"; {len(report.failed)} failed" if report.failed else "")
                   + (f"; stopped: {report.stopped}" if report.stopped else "")
                   + (f"; {len(report.stuck)} stuck" if report.stuck else ""))
    if not report.dry_run and (report.failed or report.stuck or report.stopped):
        raise typer.Exit(1)


def finished(report: R, done: Walk) -> R:
    from bodega.drain.core.report import PlannedMove

    return report.model_copy(update={
        "moved": len(done.moved), "stopped": done.stopped, "seconds": round(done.seconds, 3),
        "failed": [PlannedMove.of(m, error) for m, error in done.failed]})


@host.command("undrain")
@friendly
def undrain(name: Annotated[str, typer.Argument(help="A host, or one worker")],
            api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
            json: Json = False) -> None:
    """Lift a drain's cordon: placement uses the host's workers again. Machines moved off
    stay where they went (bodega cluster rebalance evens the fleet out)."""
    found = call(api_url, token, lambda c: c.drain_host(name, False), context=context)
    if json:
        typer.echo(jsonlib.dumps([w.model_dump(mode="json", exclude_none=True) for w in found],
                                 indent=2))
        return
    for w in found:
        typer.echo(f"{w.name}: {'still cordoned' if w.cordoned else 'takes machines again'}")


def rebalance(dry_run: DryRun = False,
              running: Annotated[bool, typer.Option(
                  "--running", help="Move running machines too (each while another of its "
                  "app keeps it served)")] = False,
              most: Annotated[int, typer.Option("--max-moves", min=1,
                                                help="Plan at most this many moves")] = 20,
              api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
              json: Json = False) -> None:
    """Move machines to lower hot hosts and stranded room, scored as bodega sim scores a
    fleet: stopped machines freely, running ones with --running. --dry-run prints the
    plan and changes nothing."""
    from bodega.drain.core.report import PlannedMove, RebalanceReport

    async def work(client: MachinesClient) -> RebalanceReport:
        from bodega.drain.core.facts import fleet_of
        from bodega.drain.core.rebalance import plan_rebalance
        from bodega.drain.steps import ApiMover, walk

        fleet = fleet_of(await client.hosts(), await client.cluster_machines())
        plan = plan_rebalance(fleet, running=running, most=most)
        report = RebalanceReport(dry_run=dry_run, running=running,
                                 before=plan.before.describe(), after=plan.after.describe(),
                                 moves=[PlannedMove.of(m) for m in plan.moves])
        if not json:
            typer.echo(f"now: {report.before}")
            typer.echo(f"{'would be' if dry_run else 'after'}: {report.after} "
                       f"({len(plan.moves)} move(s))")
            show_moves(list(plan.moves), [])
        if dry_run or not plan.moves:
            return report
        done = await walk(plan.moves, ApiMover(client), "rebalance", heard(json))
        return finished(report, done)

    report = call(api_url, token, work, context=context)
    if json:
        show(report)
    elif not report.dry_run and report.moves:
        typer.echo(f"moved {report.moved} of {len(report.moves)} in {report.seconds:.1f} s"
                   + (f"; {len(report.failed)} failed" if report.failed else ""))
    if not report.dry_run and (report.failed or report.stopped):
        raise typer.Exit(1)
