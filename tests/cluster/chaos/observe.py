"""Reading the cluster from the outside: stores opened read-only, /proc, registry replicas.

Nothing here asks a daemon anything, so a dead or wedged daemon cannot hide
its state: its SQLite files and its processes are read directly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from bodega.worker.store.queries import newest_stamp

from .cluster import Cluster, Node
from .history import Inventory
from .state import (
    CreateOutcome,
    Expectation,
    MachineProcess,
    RegistryView,
    Snapshot,
    StoredMachine,
    StoredReservation,
    Totals,
    WorkerState,
)


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    db.row_factory = sqlite3.Row
    return db


def read_worker(name: str, data_dir: Path, totals: Totals) -> WorkerState:
    path = data_dir / "worker.db"
    if not path.exists():
        return WorkerState(name=name, totals=totals)
    with contextlib.closing(_connect(path)) as db:
        # One read transaction: the tables as of one commit. Read apart, a destroy and the
        # reservation that took its room, committed between the two reads, would count twice.
        db.execute("BEGIN")
        # A reservation is live by the worker's own clock, which may not be this one (a
        # host's skewed or stepped clock): judged as of the newest time the worker stamped.
        # Whatever took a lapsed reservation's room was stamped after it lapsed.
        now = newest_stamp(db) or time.time()
        machines = [StoredMachine(id=r["id"], app=r["app"], state=r["state"],
                                  millicpus=r["millicpus"], memory_mb=r["memory_mb"],
                                  holds_compute=bool(r["holds_compute"]),
                                  idempotency_key=r["idempotency_key"])
                    for r in db.execute("SELECT * FROM machines")]
        reservations = [StoredReservation(id=r["id"], millicpus=r["millicpus"],
                                          memory_mb=r["memory_mb"],
                                          live=r["claimed_by"] is None and r["expires_at"] > now)
                        for r in db.execute("SELECT * FROM reservations")]
        unfinished = [f"{r['fsm']}:{r['step']} on {r['resource_id']}" for r in db.execute(
            "SELECT fsm, step, resource_id FROM operations WHERE status = 'running'")]
    return WorkerState(name=name, totals=totals, machines=machines, reservations=reservations,
                       unfinished_ops=unfinished)


def registry_path(c: Cluster, node: Node) -> Path:
    base = c.data_dir(node)
    return base / "registry" / "registry.db" if node.kind == "worker" else base / "registry.db"


def read_view(node: str, path: Path) -> RegistryView:
    if not path.exists():
        return RegistryView(node=node, machines={})
    with contextlib.closing(_connect(path)) as db:
        rows = db.execute("SELECT id, state FROM machines WHERE _deleted = 0").fetchall()
    return RegistryView(node=node, machines={r["id"]: r["state"] for r in rows})


def _netns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def machine_processes(hosts: dict[int, str], known: set[str], *,
                      everything: bool = False) -> list[MachineProcess]:
    """Processes carrying ``BODEGA_MACHINE_ID`` that are ours: in one of ``hosts`` (netns
    inode -> worker) or naming a machine in ``known`` (or all, with ``everything``).
    Wrappers and programs of one machine all count; the checks group them by machine."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            status = (entry / "stat").read_text()
        except OSError:
            continue
        if status.rsplit(")", 1)[-1].split()[0] == "Z":
            continue  # a zombie runs nothing
        machine = next((v[len(b"BODEGA_MACHINE_ID="):].decode() for v in environ
                        if v.startswith(b"BODEGA_MACHINE_ID=")), None)
        if machine is None:
            continue
        host = hosts.get(_netns_inode(str(entry / "ns" / "net")) or -1)
        if host is not None or machine in known or everything:
            found.append(MachineProcess(pid=int(entry.name), machine_id=machine, host=host))
    return found


def host_namespaces(c: Cluster) -> dict[int, str]:
    out = {}
    for node in c.workers:
        inode = _netns_inode(f"/run/netns/{c.hosts.namespace(node.index)}")
        if inode is not None:
            out[inode] = node.name
    return out


def snapshot(c: Cluster, creates: list[CreateOutcome] | None = None,
             expectations: list[Expectation] | None = None, *, views: bool = True) -> Snapshot:
    totals = c.totals()
    workers = [read_worker(n.name, c.data_dir(n), totals[n.name]) for n in c.workers]
    known = {m.id for w in workers for m in w.machines}
    return Snapshot(
        workers=workers, processes=machine_processes(host_namespaces(c), known),
        creates=creates or [], expectations=expectations or [],
        views=[read_view(n.name, registry_path(c, n)) for n in c.nodes] if views else [])


def sweep_machines(c: Cluster) -> int:
    """SIGKILL every machine process the run left (after its workers are stopped)."""
    killed = 0
    try:
        found = snapshot(c, views=False).processes
    except sqlite3.Error:
        found = machine_processes(host_namespaces(c), set())
    for p in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
            killed += 1
    return killed


def kernel_inventory(root: Path) -> Inventory:
    """What a run could leave in the kernel: namespaces, links, nftables tables, mounts under
    ``root``, and processes of machines."""
    def lines(*argv: str) -> list[str]:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.stdout.splitlines()

    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
              if line.split()[1].startswith(str(root))]
    return Inventory(
        namespaces=sorted(line.split()[0] for line in lines("ip", "netns", "list") if line),
        links=sorted(line.split(":")[1].strip().split("@")[0]
                     for line in lines("ip", "-o", "link", "show") if ":" in line),
        nft_tables=sorted(lines("nft", "list", "tables")),
        mounts=sorted(mounts),
        machine_processes=sorted(f"{p.pid} {p.machine_id}"
                                 for p in machine_processes({}, set(), everything=True)))
