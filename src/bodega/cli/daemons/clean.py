"""``bodega clean``: remove the kernel objects a cluster that is not running left behind."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.session.errors import friendly
from bodega.cluster import cleanup, stored_cluster


@friendly
def clean(
    data_dir: Annotated[Path, typer.Option(
        help="The data dir of the cluster (`bodega up`), joined host (`bodega join`) or "
             "lone worker to clean up after")]
    = Path(".bodega"),
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be removed; remove nothing")] = False,
    legacy: Annotated[bool, typer.Option(
        "--legacy", help="Instead: remove what versions before cluster ids left (bodega-N-N-N "
                         "namespaces, bdg-N-N bridges, ...) that nothing uses now")] = False,
) -> None:
    """Remove a stopped cluster's leftovers: namespaces, veths, bridges, cgroups, mounts, the
    private network's tables, interfaces and rules, locks, port claims and the HAProxy
    files (TLS keys among them) a killed proxy left.

    Only objects carrying the cluster id stored in the data dir are touched (for a
    joined host, only its own workers'), and processes still in them (machines of a
    cluster killed with SIGKILL) are killed. Refused while the cluster runs: `bodega
    up` and `bodega join` clean up after themselves when they stop.
    """
    if legacy:
        report = asyncio.run(_clean_legacy(dry_run))
    else:
        data_dir = data_dir.resolve()
        why = cleanup.running(data_dir)
        if why is not None:
            raise ValueError(f"the cluster in {data_dir} is running: {why}; stop it first "
                             "(it cleans up after itself when it stops)")
        report = asyncio.run(_clean(data_dir, stored_cluster.read(data_dir), dry_run))
    for line in report.lines(dry_run):
        typer.echo(line)
    for problem in report.problems:
        typer.echo(f"could not remove {problem}", err=True)
    if not report.found:
        typer.echo(f"nothing to clean for {report.whose}")
    else:
        typer.echo(f"{'would remove' if dry_run else 'removed'} {report.found} leftovers of "
                   f"{report.whose}")
    if report.problems:
        raise typer.Exit(1)


async def _clean(data_dir: Path, stored: stored_cluster.StoredCluster,
                 dry_run: bool) -> cleanup.SweepReport:
    listed = await cleanup.sweep(data_dir, stored.cluster_id, workers=stored.workers,
                                 dry_run=True)
    if dry_run or not listed.anything:
        return listed
    _need_root(listed)
    return await cleanup.sweep(data_dir, stored.cluster_id, workers=stored.workers)


async def _clean_legacy(dry_run: bool) -> cleanup.SweepReport:
    listed = await cleanup.sweep_legacy(dry_run=True)
    if dry_run or not listed.found:
        return listed
    _need_root(listed)
    return await cleanup.sweep_legacy()


def _need_root(listed: cleanup.SweepReport) -> None:
    if os.geteuid() != 0:
        raise ValueError(f"removing {listed.anything} leftovers of {listed.whose} needs root; "
                         "run it as root (--dry-run lists them)")
