"""What a cluster leaves in the kernel, removed: as ``bodega up`` stops on Ctrl-C, and by
``bodega clean``.

Every kernel object a cluster's workers make carries the cluster id stored in
its data dir (``runtime/cluster_id.py``; names in ``worker/host/core/names.py``).
Cleanup lives in two places, both on an operator's Ctrl-C, which stops the machines:

- each worker stopping for good (on SIGINT, with ``--stop-machines-on-interrupt``,
  which ``bodega up`` passes) sweeps what it made, once its machines are stopped;
- ``bodega up``, once every component has stopped, sweeps everything carrying
  its cluster id: what a worker killed after the stop grace or one that crashed
  left, machines still running included.

A stop that leaves the machines running (SIGTERM), and any process killed with
SIGKILL, removes nothing: the machines keep running and the next start
re-adopts them. So as ``bodega up`` starts, it sweeps only what belongs to none
of the workers it is about to start (``sweep_all_but``: a worker an earlier run
had and this one has not, its machines included). ``bodega clean`` runs
the same sweep for a cluster that will not run again (say its ``bodega up`` or
``bodega join`` was killed with SIGKILL), finding the id wherever the data dir keeps it
(``stored_cluster.py``): for a joined host, only its own workers' objects, since
the cluster's other hosts may share the kernel. ``--legacy`` removes what
versions before cluster ids left and nothing uses.

A sweep takes, besides the namespaces, links, cgroups, runtime state and mounts
``worker/host/sweep.py`` knows, what the private network leaves
(``network_sweep.py``), the subnet locks of the cluster and the port claims no
process holds any more (``port_claims.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bodega.cluster import machine_range, network_sweep, port_claims
from bodega.cluster.joined import JOIN_LOCK
from bodega.cluster.stored_cluster import HostWorker
from bodega.networking.core.kernel_objects import NetworkLeftovers, Scope
from bodega.networking.core.sixpn import host_field
from bodega.proxy.plane import WORKDIR_NOTE, left_workdir
from bodega.runtime.hostinfo import hostname
from bodega.runtime.pid_lock import holder
from bodega.worker.config import LOCK_FILE
from bodega.worker.host.core.names import HostNames, Owner, legacy_namespace, octets
from bodega.worker.host.parts import default_subnet
from bodega.worker.host.survey import (
    cgroup_pids,
    namespace_id,
    pids_in_namespaces,
    survey,
)
from bodega.worker.host.sweep import Leftovers, legacy, owned, processes, remove, union

UP_LOCK = "up.lock"


@dataclass(frozen=True)
class SweepReport:
    whose: str  # "cluster abcde" or "older versions"
    objects: tuple[str, ...] = ()
    processes: dict[int, str] = field(default_factory=dict)
    locks: tuple[Path, ...] = ()
    claims: tuple[Path, ...] = ()  # port claims nobody holds: a killed cluster's, whichever
    problems: tuple[str, ...] = ()
    proxy_dirs: tuple[Path, ...] = ()  # HAProxy's files, which a killed proxy left

    @property
    def found(self) -> int:
        """How many of the leftovers are this cluster's (claims do not say whose they are)."""
        return len(self.objects) + len(self.processes) + len(self.locks) + len(self.proxy_dirs)

    @property
    def anything(self) -> int:
        return self.found + len(self.claims)

    def lines(self, dry_run: bool) -> list[str]:
        verb = "would remove" if dry_run else "removed"
        kill = "would kill" if dry_run else "killed"
        return ([f"{kill} process {pid} ({_command(pid)}) in {where}"
                 for pid, where in sorted(self.processes.items())]
                + [f"{verb} {line}" for line in self.objects]
                + [f"{verb} subnet lock {path}" for path in self.locks]
                + [f"{verb} port claim {path}" for path in self.claims]
                + [f"{verb} a killed proxy's HAProxy files (TLS keys among them) in {path}"
                   for path in self.proxy_dirs])


def running(data_dir: Path) -> str | None:
    """Why the cluster in ``data_dir`` counts as running now, or None if it does not."""
    for name, who in ((UP_LOCK, "bodega up"), (JOIN_LOCK, "bodega join")):
        pid = holder(data_dir / name)
        if pid is not None:
            return f"{who} is running on it (pid {pid})"
    for lock in [data_dir / LOCK_FILE, *sorted(data_dir.glob(f"workers/*/{LOCK_FILE}"))]:
        pid = holder(lock)
        if pid is not None:
            return f"a worker is running on {lock.parent} (pid {pid})"
    alive = component_pids(data_dir)
    if alive:
        return f"its components are still running (pids {', '.join(map(str, alive))})"
    return None


def component_pids(data_dir: Path) -> list[int]:
    """Pids ``cluster.json`` lists that still run a component of this data dir."""
    try:
        listed = json.loads((data_dir / "cluster.json").read_text()).get("components", [])
    except (OSError, ValueError, AttributeError):
        return []
    alive = []
    for component in listed if isinstance(listed, list) else []:
        pid = component.get("pid") if isinstance(component, dict) else None
        if isinstance(pid, int) and _runs_under(pid, data_dir):
            alive.append(pid)
    return alive


async def until_components_gone(data_dir: Path, timeout: float) -> list[int]:
    """Wait (up to ``timeout`` seconds) for the components ``cluster.json`` lists to end;
    returns those still running then."""
    deadline = time.monotonic() + timeout
    while (pids := component_pids(data_dir)) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return pids


async def sweep(data_dir: Path, cluster_id: str, *,
                workers: tuple[HostWorker, ...] | None = None,
                dry_run: bool = False) -> SweepReport:
    """Remove (or, dry, list) every kernel object carrying ``cluster_id`` (``workers``: of
    those workers only), the processes still in them, the subnet locks the cluster left and
    the port claims nobody holds."""
    names = HostNames(cluster_id)
    owners = [Owner(names)] if workers is None else [
        Owner(names, subnet=w.subnet, scope=names.cgroup_scope(w.name)) for w in workers]
    found = survey()
    leftovers = union(owned(found, owner, data_dir) for owner in owners)
    network = await network_sweep.survey(Scope(cluster_id, _host_fields(workers)))
    return await _carry_out(f"cluster {cluster_id}", leftovers, machine_range.stale(cluster_id),
                            dry_run, network=network, claims=port_claims.stale(),
                            proxy_dirs=_proxy_dirs(data_dir))


async def sweep_all_but(data_dir: Path, cluster_id: str,
                        kept: tuple[HostWorker, ...]) -> SweepReport:
    """Remove what carries ``cluster_id`` but belongs to none of the ``kept`` workers (a
    cluster starting again: what workers it no longer runs left, their machines included),
    the subnet locks and port claims nobody holds, and a killed proxy's HAProxy files. The
    kept workers' objects, machines still running in them included, are theirs to take up."""
    names = HostNames(cluster_id)
    found = survey()
    theirs = union(owned(found, Owner(names, subnet=w.subnet, scope=names.cgroup_scope(w.name)),
                         data_dir / "workers" / w.name) for w in kept)
    leftovers = owned(found, Owner(names), data_dir).without(theirs)
    network = await network_sweep.survey(
        Scope(cluster_id, spared=_host_fields(kept) or frozenset()))
    return await _carry_out(f"cluster {cluster_id}", leftovers, machine_range.stale(cluster_id),
                            False, network=network, claims=port_claims.stale(),
                            proxy_dirs=_proxy_dirs(data_dir))


def _proxy_dirs(data_dir: Path) -> list[Path]:
    """HAProxy directories the proxies of ``data_dir`` noted and left (a lone proxy's data
    dir, or a cluster's with its proxies one or two levels down)."""
    found = []
    for depth in ("", "*/", "*/*/"):
        for note in sorted(data_dir.glob(f"{depth}{WORKDIR_NOTE}")):
            left = left_workdir(note.parent)
            if left is not None:
                found.append(left)
    return found


def _host_fields(workers: tuple[HostWorker, ...] | None) -> frozenset[int] | None:
    """The private network's host fields of ``workers`` (None: every one); a subnet that
    gives none has no private network."""
    if workers is None:
        return None
    fields = set()
    for worker in workers:
        with contextlib.suppress(ValueError):
            fields.add(host_field(ipaddress.IPv4Network(worker.subnet)))
    return frozenset(fields)


async def sweep_legacy(*, dry_run: bool = False,
                       only: Callable[[str], bool] | None = None) -> SweepReport:
    """Remove (or list) what versions before cluster ids left that nothing uses now;
    ``only``: of those, the objects whose names it takes (and no lock file)."""
    found = survey()
    namespaces = [n for n in found.namespaces if legacy_namespace(n)]
    inodes = {inode: name for name in namespaces if (inode := namespace_id(name)) is not None}
    busy_namespaces = {inodes[i] for i in pids_in_namespaces(inodes).values()}
    busy_scopes = {scope.name for scope in found.scopes if cgroup_pids(scope)}
    live_octets, live_scopes = live_workers()
    for subnet in machine_range.held_subnets():
        with contextlib.suppress(ValueError):
            live_octets.add(_octets_of(subnet))
    leftovers = legacy(found, busy_namespaces=busy_namespaces, busy_scopes=busy_scopes,
                       live_octets=live_octets, live_scopes=live_scopes)
    if only is not None:
        return await _carry_out("older versions", leftovers.only(only), [], dry_run)
    return await _carry_out("older versions", leftovers, machine_range.stale(None), dry_run)


async def _carry_out(whose: str, leftovers: Leftovers, locks: list[Path], dry_run: bool, *,
                     network: NetworkLeftovers | None = None,
                     claims: list[Path] | None = None,
                     proxy_dirs: list[Path] | None = None) -> SweepReport:
    network = network or NetworkLeftovers()
    procs = {**{pid: f"overlay {interface}" for pid, interface in network.daemons},
             **processes(leftovers)}
    objects = (*leftovers.lines(), *network.lines())
    if dry_run:
        return SweepReport(whose, objects, procs, tuple(locks), tuple(claims or ()),
                           proxy_dirs=tuple(proxy_dirs or ()))
    problems = await remove(leftovers) if leftovers else []
    problems += await network_sweep.remove(network) if network else []
    removed = machine_range.remove_stale(locks)
    unclaimed = port_claims.remove_stale(claims or [])
    for path in proxy_dirs or ():
        try:
            shutil.rmtree(path)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
    return SweepReport(whose, objects, procs, tuple(removed), tuple(unclaimed), tuple(problems),
                       proxy_dirs=tuple(proxy_dirs or ()))


def live_workers() -> tuple[set[tuple[int, int]], set[str]]:
    """The subnets (as octets) and names of the workers running on this host now, read
    from their command lines: what ``--legacy`` must not touch, whatever their version."""
    subnets: set[tuple[int, int]] = set()
    names: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = [a.decode(errors="replace")
                    for a in (proc / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if "bodega" not in " ".join(argv[:3]) or "worker" not in argv:
            continue
        name = _option(argv, "--name") or hostname()
        names.add(name)
        with contextlib.suppress(ValueError):
            subnets.add(_octets_of(_option(argv, "--machine-subnet") or default_subnet(name)))
    return subnets, names


def _octets_of(subnet: str) -> tuple[int, int]:
    return octets(ipaddress.ip_network(subnet))


def _option(argv: list[str], flag: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _runs_under(pid: int, data_dir: Path) -> bool:
    """``pid`` is alive (not a zombie) and names something under ``data_dir`` in its argv."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False
    wanted = str(data_dir).encode()
    # A component forked by the fork server shows its command line as one string.
    return state != "Z" and any(arg.startswith(wanted) or b" " + wanted in arg for arg in argv)


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "gone"

