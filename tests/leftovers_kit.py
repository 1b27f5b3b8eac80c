"""Sweeping what a test's workers left on the host, by the cluster ids in their data dirs.

A worker run alone makes a cluster id in its data dir the first time; every
namespace, link and cgroup it makes carries it. A test that killed a worker
(or whose worker never got to stop) sweeps those ids, and only those: other
tests running on the host keep theirs.
"""

from __future__ import annotations

from pathlib import Path

from bodega.cluster import cleanup
from bodega.runtime import cluster_id
from bodega.worker.host.core.names import HostNames


def names_of(data_dir: Path) -> HostNames:
    """The names the worker (or cluster) of ``data_dir`` gives its kernel objects."""
    cid = cluster_id.read(data_dir)
    assert cid is not None, f"{data_dir} has no cluster id"
    return HostNames(cid)


async def sweep_data_dir(data_dir: Path) -> None:
    cid = cluster_id.read(data_dir)
    if cid is not None:
        await cleanup.sweep(data_dir.resolve(), cid)


async def sweep_under(root: Path) -> None:
    """Sweep every cluster whose data dir is ``root`` or up to three levels under it."""
    for depth in ("", "*/", "*/*/", "*/*/*/"):
        for found in sorted(root.glob(f"{depth}{cluster_id.FILE}")):
            await sweep_data_dir(found.parent)
