"""What a sweep looks at: the host's namespaces, links, cgroups, runtime state and mounts.

Read from ``/run``, sysfs and procfs only (no subprocess, nothing written), so
surveying is cheap and works unprivileged; deciding what of it to remove is
``sweep``'s job. Only the places bodega names objects in are read: every
namespace and link (names decide), the ``bodega/`` directory of each cgroup
hierarchy, ``/run/bodega``, and mount points.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

NETNS_DIR = Path("/run/netns")
# A marker per wired namespace; on the same tmpfs as the namespaces, so a reboot clears both.
MARKER_DIR = Path("/run/bodega/netns")
RUNC_STATE = Path("/run/bodega/runc")
CGROUP_ROOT = Path("/sys/fs/cgroup")
SYS_NET = Path("/sys/class/net")
MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True)
class Link:
    name: str
    master: str | None  # the bridge it is a port of
    bridge: bool


@dataclass(frozen=True)
class Survey:
    namespaces: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()
    markers: tuple[str, ...] = ()
    scopes: tuple[Path, ...] = ()  # <hierarchy>/bodega/<scope>
    runc_states: tuple[Path, ...] = ()  # /run/bodega/runc/<scope>
    mounts: tuple[Path, ...] = ()  # every mount point


def survey(cgroup_root: Path = CGROUP_ROOT) -> Survey:
    return Survey(
        namespaces=_names(NETNS_DIR), links=links(), markers=_names(MARKER_DIR),
        scopes=tuple(scope for parent in bodega_cgroups(cgroup_root)
                     for scope in _dirs(parent)),
        runc_states=tuple(_dirs(RUNC_STATE)), mounts=mount_points(),
    )


def links() -> tuple[Link, ...]:
    found = []
    for entry in _entries(SYS_NET):
        master = None
        with contextlib.suppress(OSError):
            master = os.path.basename(os.readlink(entry / "master"))
        found.append(Link(entry.name, master, (entry / "bridge").is_dir()))
    return tuple(found)


def bodega_cgroups(root: Path = CGROUP_ROOT) -> list[Path]:
    """``bodega/`` in every hierarchy mounted under ``root`` (v1 controllers, or v2 alone)."""
    seen: dict[Path, Path] = {}
    for parent in (root / "bodega", *(d / "bodega" for d in _dirs(root))):
        if parent.is_dir():
            seen.setdefault(parent.resolve(), parent)
    return list(seen.values())


def mount_points(mountinfo: Path = MOUNTINFO) -> tuple[Path, ...]:
    try:
        text = mountinfo.read_text()
    except OSError:
        return ()
    return tuple(Path(_unescape(line.split()[4])) for line in text.splitlines()
                 if len(line.split()) > 4)


def cgroup_pids(scope: Path) -> set[int]:
    """Every process in ``scope`` or any cgroup below it."""
    pids: set[int] = set()
    for directory, _subdirs, files in os.walk(scope):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in Path(directory, "cgroup.procs").read_text().split())
    return pids


NamespaceId = tuple[int, int]  # (st_dev, st_ino) of the namespace's nsfs inode


def namespace_id(name: str) -> NamespaceId | None:
    """The namespace ``/run/netns/<name>`` is (None if there is none, or nothing is mounted
    there yet: a file ``ip netns add`` has not bound)."""
    try:
        st = os.stat(NETNS_DIR / name)
        own = os.stat("/proc/self/ns/net")
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if st.st_dev == own.st_dev else None


def pids_in_namespaces(namespaces: Iterable[NamespaceId]) -> dict[int, NamespaceId]:
    """pid -> namespace, for every process whose network namespace is one of these."""
    wanted = set(namespaces)
    found: dict[int, NamespaceId] = {}
    if not wanted:
        return found
    for entry in _entries(Path("/proc")):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                st = os.stat(entry / "ns" / "net")
                if (st.st_dev, st.st_ino) in wanted:
                    found[int(entry.name)] = (st.st_dev, st.st_ino)
    return found


def _unescape(field: str) -> str:
    """Mountinfo writes space, tab, newline and backslash as octal escapes."""
    for escaped, plain in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, plain)
    return field


def _entries(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:
        return []


def _names(directory: Path) -> tuple[str, ...]:
    return tuple(sorted(entry.name for entry in _entries(directory)))


def _dirs(directory: Path) -> list[Path]:
    return sorted(entry for entry in _entries(directory)
                  if entry.is_dir() and not entry.is_symlink())
