"""The cluster a data dir holds: where bodega stored its id, and which of its workers ran there.

``bodega up`` keeps its cluster id in ``<data dir>/cluster-id``, and so does a lone
``bodega worker`` not given ``--cluster-id`` (``runtime/cluster_id.py``): every kernel
object carrying that id on this host is the data dir's. ``bodega join`` keeps the
id in ``joined.json``, beside the names and machine subnets of the workers it runs
here: another host, or ``bodega up`` sharing this kernel, may carry the same id,
so only those workers' objects are the data dir's. A data dir under another's
``workers/`` is one worker of that cluster, given the id on its command line; it
stores none. ``decide`` says which (pure, from what the files say); ``read``
reads the files.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from bodega.cluster.joined import JOINED, JoinedHost
from bodega.runtime import cluster_id
from bodega.worker.config import STORE_FILE
from bodega.worker.host.core.names import Subnet
from bodega.worker.host.parts import default_subnet


class NothingStored(ValueError):
    """The data dir names no cluster: one line saying what it is instead."""


@dataclass(frozen=True)
class HostWorker:
    """A worker ``bodega join`` runs on this host: its objects carry its subnet and name."""

    name: str
    subnet: Subnet


@dataclass(frozen=True)
class StoredCluster:
    cluster_id: str
    found_in: str  # the file that names it
    workers: tuple[HostWorker, ...] | None = None  # None: every object carrying the id


@dataclass(frozen=True)
class DataDirFiles:
    """What bodega may have written in a data dir, as read (``read_files``)."""

    path: Path
    exists: bool = True
    cluster_id: str | None = None  # the id in ``cluster-id``, checked
    joined: JoinedHost | None = None
    worker_state: bool = False  # a worker kept its machines here
    within: Path | None = None  # the data dir this one is a worker's of (``<it>/workers/``)


def decide(files: DataDirFiles) -> StoredCluster:
    """The cluster ``files`` name, or ``NothingStored`` saying what the data dir is."""
    if files.cluster_id is not None:
        return StoredCluster(files.cluster_id, cluster_id.FILE)
    if files.joined is not None:
        return StoredCluster(cluster_id.check(files.joined.cluster_id), JOINED, tuple(
            HostWorker(w.name, ipaddress.ip_network(w.subnet or default_subnet(w.name)))
            for w in files.joined.workers))
    where = files.path
    if not files.exists:
        raise NothingStored(f"{where} does not exist")
    if files.within is not None:
        raise NothingStored(f"{where} is worker {where.name}'s data dir in the cluster of "
                            f"{files.within}, which keeps its id: bodega clean --data-dir "
                            f"{files.within}")
    if files.worker_state:
        raise NothingStored(f"{where} is a worker's data dir, but its worker was given "
                            "--cluster-id and keeps no id there: clean the data dir of the "
                            "cluster that gave it")
    raise NothingStored(f"{where} holds nothing bodega wrote (no {cluster_id.FILE}, no "
                        f"{JOINED}); for what versions before cluster ids left, use --legacy")


def read(data_dir: Path) -> StoredCluster:
    return decide(read_files(data_dir))


def read_files(data_dir: Path) -> DataDirFiles:
    try:
        joined = JoinedHost.read(data_dir)
    except (ValidationError, ValueError) as err:
        first = err.errors()[0]["msg"] if isinstance(err, ValidationError) else str(err)
        raise ValueError(f"{data_dir / JOINED} is not what bodega join writes: "
                         f"{first}") from None
    parent = data_dir.parent
    within = parent.parent if parent.name == "workers" and _names_a_cluster(parent.parent) \
        else None
    return DataDirFiles(data_dir, data_dir.is_dir(), cluster_id.read(data_dir), joined,
                        (data_dir / STORE_FILE).exists(), within)


def _names_a_cluster(data_dir: Path) -> bool:
    return (data_dir / cluster_id.FILE).exists() or (data_dir / JOINED).exists()
