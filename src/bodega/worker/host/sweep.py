"""Sweeping a cluster's kernel objects off the host: what to take (pure), then taking it.

``owned`` picks, from a ``Survey``, every object whose name carries an
``Owner``'s cluster id (and, for one worker, its subnet and cgroup scope),
plus mounts a machine left under the owner's data dir. ``legacy`` picks what
older versions named without an id and nothing still uses. ``remove`` then
kills the processes left in those cgroups and namespaces (a machine a worker
killed with SIGKILL never stopped), unmounts, deletes links and namespaces,
and removes markers, cgroups and runtime state, waiting (bounded) for the
kernel to let go of each, so a sweep that returns has left nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path

from bodega.worker.drivers.base import DriverError
from bodega.worker.drivers.oci.mounts import unmount
from bodega.worker.host.core.names import (
    Owner,
    legacy_bridge,
    legacy_namespace,
    legacy_octets,
    legacy_scope,
    legacy_veth_namespace,
)
from bodega.worker.host.network import run
from bodega.worker.host.survey import (
    MARKER_DIR,
    NETNS_DIR,
    SYS_NET,
    Survey,
    cgroup_pids,
    namespace_id,
    pids_in_namespaces,
)

SETTLE = 10.0  # seconds a sweep waits for killed processes, links and cgroups to go
POLL = 0.02


@dataclass(frozen=True)
class Leftovers:
    """Objects to remove; ``kill``: end the processes still in them first."""

    namespaces: tuple[str, ...] = ()
    links: tuple[str, ...] = ()  # host-side: bridges and veth ends
    markers: tuple[str, ...] = ()
    scopes: tuple[Path, ...] = ()  # cgroup subtrees
    runc_states: tuple[Path, ...] = ()
    mounts: tuple[Path, ...] = ()
    kill: bool = True

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self) if f.name != "kill")

    def count(self) -> int:
        return sum(len(getattr(self, f.name)) for f in fields(self) if f.name != "kill")

    def only(self, wanted: Callable[[str], bool]) -> Leftovers:
        """The objects whose name ``wanted`` takes (a cgroup or state dir by its own name)."""
        return replace(
            self, namespaces=tuple(filter(wanted, self.namespaces)),
            links=tuple(filter(wanted, self.links)), markers=tuple(filter(wanted, self.markers)),
            scopes=tuple(s for s in self.scopes if wanted(s.name)),
            runc_states=tuple(s for s in self.runc_states if wanted(s.name)),
            mounts=tuple(m for m in self.mounts if wanted(str(m))))

    def without(self, other: Leftovers) -> Leftovers:
        """These objects but ``other``'s (what a kept owner will take up)."""
        return Leftovers(
            namespaces=tuple(n for n in self.namespaces if n not in other.namespaces),
            links=tuple(n for n in self.links if n not in other.links),
            markers=tuple(n for n in self.markers if n not in other.markers),
            scopes=tuple(s for s in self.scopes if s not in other.scopes),
            runc_states=tuple(s for s in self.runc_states if s not in other.runc_states),
            mounts=tuple(m for m in self.mounts if m not in other.mounts), kill=self.kill)

    def lines(self) -> list[str]:
        """One line per object, saying what it is."""
        return ([f"mount {m}" for m in self.mounts]
                + [f"network namespace {n}" for n in self.namespaces]
                + [f"{'bridge' if n.startswith('bdg') else 'veth'} {n}" for n in self.links]
                + [f"netns marker {MARKER_DIR / n}" for n in self.markers]
                + [f"cgroup {s}" for s in self.scopes]
                + [f"runtime state {s}" for s in self.runc_states])


def owned(survey: Survey, owner: Owner, data_dir: Path | None = None) -> Leftovers:
    """Everything in ``survey`` that is ``owner``'s: by name, and mounts under ``data_dir``."""
    return Leftovers(
        namespaces=tuple(n for n in survey.namespaces if owner.namespace(n)),
        links=_bridges_last(link.name for link in survey.links if owner.link(link.name)),
        markers=tuple(n for n in survey.markers if owner.namespace(n)),
        scopes=tuple(s for s in survey.scopes if owner.cgroup_scope(s.name)),
        runc_states=tuple(s for s in survey.runc_states if owner.cgroup_scope(s.name)),
        mounts=tuple(m for m in survey.mounts if data_dir is not None
                     and _machine_mount(m, data_dir)),
    )


def union(parts: Iterable[Leftovers]) -> Leftovers:
    """Every object of ``parts``, once: what several owners (a joined host's workers) left."""
    listed = list(parts)

    def every(name: str) -> list[object]:
        return list(dict.fromkeys(x for part in listed for x in getattr(part, name)))

    return Leftovers(
        namespaces=tuple(sorted(map(str, every("namespaces")))),
        links=_bridges_last(map(str, every("links"))),
        markers=tuple(sorted(map(str, every("markers")))),
        scopes=tuple(Path(str(s)) for s in every("scopes")),
        runc_states=tuple(Path(str(s)) for s in every("runc_states")),
        mounts=tuple(Path(str(m)) for m in every("mounts")),
        kill=all(part.kill for part in listed))


def legacy(survey: Survey, *, busy_namespaces: set[str], busy_scopes: set[str],
           live_octets: set[tuple[int, int]], live_scopes: set[str]) -> Leftovers:
    """What older versions left, named without a cluster id, that nothing uses any more.

    A namespace goes unless a process is in it or its subnet is live (a running
    cluster holds it, or a worker runs with it); a veth and a marker go with their
    namespace; a bridge goes only if every port it has goes too; a cgroup scope and
    runtime state go unless a process is in them or a running worker has that name.
    Nothing is killed: what is in use stays.
    """
    namespaces = {n for n in survey.namespaces if legacy_namespace(n)
                  and n not in busy_namespaces and legacy_octets(n) not in live_octets}
    present = set(survey.namespaces)

    def gone(namespace: str | None) -> bool:
        return namespace is not None and (namespace in namespaces or (
            namespace not in present and legacy_octets(namespace) not in live_octets))

    veths = {link.name for link in survey.links if gone(legacy_veth_namespace(link.name))}
    ports: dict[str, list[str]] = {}
    for link in survey.links:
        if link.master is not None:
            ports.setdefault(link.master, []).append(link.name)
    bridges = {link.name for link in survey.links
               if link.bridge and legacy_bridge(link.name)
               and legacy_octets(link.name) not in live_octets
               and all(port in veths for port in ports.get(link.name, []))}
    scopes = tuple(s for s in survey.scopes if legacy_scope(s.name)
                   and s.name not in busy_scopes and s.name not in live_scopes)
    return Leftovers(
        namespaces=tuple(sorted(namespaces)), links=_bridges_last([*veths, *bridges]),
        markers=tuple(n for n in survey.markers if legacy_namespace(n) and gone(n)),
        scopes=scopes,
        runc_states=tuple(s for s in survey.runc_states if legacy_scope(s.name)
                          and s.name not in busy_scopes and s.name not in live_scopes),
        kill=False,
    )


def processes(leftovers: Leftovers) -> dict[int, str]:
    """pid -> where it was found, for the processes still in ``leftovers``' objects."""
    if not leftovers.kill:
        return {}
    found: dict[int, str] = {}
    for scope in leftovers.scopes:
        for pid in cgroup_pids(scope):
            found.setdefault(pid, f"cgroup {scope}")
    inodes = {inode: name for name in leftovers.namespaces
              if (inode := namespace_id(name)) is not None}
    for pid, inode in pids_in_namespaces(inodes).items():
        found.setdefault(pid, f"network namespace {inodes[inode]}")
    found.pop(os.getpid(), None)
    return found


async def remove(leftovers: Leftovers, settle: float = SETTLE) -> list[str]:
    """Remove ``leftovers``; returns one line per object that would not go."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settle
    if leftovers.kill:
        await _kill(leftovers, deadline)
    problems: list[str] = []
    for mount in sorted(leftovers.mounts, key=lambda m: len(m.parts), reverse=True):
        try:
            unmount(mount)
        except DriverError as exc:
            problems.append(str(exc))
    # A veth's host end takes its pair with it at once; a namespace's own end would go
    # only once the kernel has finished with the namespace, a little later.
    if leftovers.links:
        batch = "".join(f"link del {name}\n" for name in leftovers.links)
        await run("ip", "-force", "-batch", "-", stdin=batch.encode(), check=False)
    if leftovers.namespaces:
        batch = "".join(f"netns del {name}\n" for name in leftovers.namespaces)
        await run("ip", "-force", "-batch", "-", stdin=batch.encode(), check=False)
    for name in leftovers.markers:
        with contextlib.suppress(FileNotFoundError):
            (MARKER_DIR / name).unlink()
    for state in leftovers.runc_states:
        await asyncio.to_thread(shutil.rmtree, state, True)
    while True:
        left = _still_there(leftovers)
        if not left or loop.time() > deadline:
            break
        await asyncio.sleep(POLL)
    for scope in leftovers.scopes:
        with contextlib.suppress(OSError):  # emptied: another cluster's may still be in it
            scope.parent.rmdir()
    return problems + [f"{line}: still there after {settle:.0f}s" for line in left]


def _still_there(leftovers: Leftovers) -> list[str]:
    """What is left, removing the cgroups that can go now (a dying process holds one)."""
    left = [f"network namespace {n}" for n in leftovers.namespaces
            if (NETNS_DIR / n).exists()]
    left += [f"link {n}" for n in leftovers.links if (SYS_NET / n).exists()]
    left += [f"cgroup {s}" for s in leftovers.scopes if not _remove_tree(s)]
    return left


async def _kill(leftovers: Leftovers, deadline: float) -> None:
    pids = processes(leftovers)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for scope in leftovers.scopes:  # a frozen process dies of its SIGKILL only once thawed
        _thaw(scope)
    loop = asyncio.get_running_loop()
    while any(_alive(pid) for pid in pids) and loop.time() < deadline:
        await asyncio.sleep(POLL)


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # our own child (a worker's machine) is reaped here
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _thaw(scope: Path) -> None:
    for directory, _subdirs, files in os.walk(scope):
        for name, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
            if name in files:
                with contextlib.suppress(OSError):
                    Path(directory, name).write_text(f"{value}\n")


def _remove_tree(scope: Path) -> bool:
    """rmdir ``scope`` and every cgroup below it, deepest first; True once it is gone."""
    for directory, subdirs, _files in os.walk(scope, topdown=False):
        for sub in subdirs:
            _rmdir(Path(directory, sub))
    _rmdir(scope)
    return not scope.exists()


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
            raise


def _machine_mount(mount: Path, data_dir: Path) -> bool:
    """A mount a machine left under a data dir (an image's root), never the data dir itself."""
    if not mount.is_relative_to(data_dir):
        return False
    return "machines" in mount.relative_to(data_dir).parts


def _bridges_last(names: Iterable[str]) -> tuple[str, ...]:
    """Veths before bridges, each group sorted: a bridge goes once its ports have."""
    listed = sorted(set(names))
    return tuple([n for n in listed if not n.startswith("bdg")]
                 + [n for n in listed if n.startswith("bdg")])
