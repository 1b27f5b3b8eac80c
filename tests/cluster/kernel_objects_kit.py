"""The host's kernel objects, as the tools an operator would use list them, for before/after.

Read from ``ip netns``, ``ip -o link``, ``nft list tables``, ``/proc/mounts``, the
cgroup trees (``/sys/fs/cgroup/<hierarchy>/bodega/...``) and ``/run/bodega``. A
test compares two snapshots two ways:

- ``carrying(marks)``: the objects naming one cluster (its id, its data dir, or
  the subnet-only names older versions gave its range): none may be left;
- ``unexplained(before, after, marks)``: every object that appeared or went
  between the two, minus those other clusters or test kits on the host own
  (bodega-style names not carrying ``marks``, mounts under other tests' dirs).
  With nothing else running, that is the plain global comparison.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, fields
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
RUN = Path("/run/bodega")
# Names other bodega clusters (any version) and the test kits (tests/cluster/netns_kit.py) give
# their objects: a change in one of these, not carrying our marks, is someone else's doing.
FOREIGN_NAME = re.compile(r"^(bodega-|bdg|bv|bwg|btb|btv|bdgt-)")
# The nftables tables bodega's workers keep in the host's namespace (their fences), each
# named with its cluster id: one of another cluster is that cluster's doing.
FOREIGN_TABLE = re.compile(r"^table (inet|bridge) (bodega6pn_|bodegafence_)")
CONTAINERS_STORAGE = "/var/lib/containers/storage/"  # buildah's and podman's


@dataclass(frozen=True)
class Snapshot:
    namespaces: frozenset[str]
    links: frozenset[str]
    nft_tables: frozenset[str]
    mounts: frozenset[str]  # "<source> <mount point> <type>"
    cgroups: frozenset[str]  # "<hierarchy>/bodega/..." for every cgroup under bodega/
    run_files: frozenset[str]  # /run/bodega/{subnets,netns}/*, runc/* and runc/*/* (containers)

    def carrying(self, marks: list[str]) -> dict[str, list[str]]:
        """Per kind, the objects whose name holds one of ``marks``."""
        found = {f.name: sorted(o for o in getattr(self, f.name) if any(m in o for m in marks))
                 for f in fields(self)}
        return {kind: objects for kind, objects in found.items() if objects}

    def counts(self) -> dict[str, int]:
        return {f.name: len(getattr(self, f.name)) for f in fields(self)}


def snapshot() -> Snapshot:
    return Snapshot(
        namespaces=frozenset(line.split()[0] for line in _out("ip", "netns").splitlines()
                             if line.strip()),
        links=frozenset(line.split(":")[1].strip().split("@")[0]
                        for line in _out("ip", "-o", "link", "show").splitlines()),
        nft_tables=frozenset(line.strip() for line in _out("nft", "list", "tables").splitlines()
                             if line.strip()),
        mounts=frozenset(" ".join(line.split()[:3])
                         for line in Path("/proc/mounts").read_text().splitlines()),
        cgroups=frozenset(_cgroups()),
        run_files=frozenset(_run_files()),
    )


def unexplained(before: Snapshot, after: Snapshot, marks: list[str]) -> dict[str, list[str]]:
    """Objects that appeared or went between the two snapshots and that no one else on the
    host explains; objects carrying ``marks`` (ours) are never explained away."""
    changed: dict[str, list[str]] = {}
    for f in fields(before):
        moved = getattr(before, f.name) ^ getattr(after, f.name)
        left = sorted(o for o in moved if any(m in o for m in marks)
                      or not _someone_elses(f.name, o, before, after))
        if left:
            changed[f.name] = left
    return changed


def _someone_elses(kind: str, obj: str, before: Snapshot, after: Snapshot) -> bool:
    if kind in ("namespaces", "links"):
        return FOREIGN_NAME.match(obj) is not None
    if kind == "run_files":
        return True  # named by other clusters' subnets or ids (ours carry our marks)
    if kind == "cgroups":
        parts = obj.split("/")
        if len(parts) > 2:
            return True  # under another cluster's scope (ours carry our id)
        # bodega/ itself: shared. Gone, it was removed once empty, by whichever cluster or
        # test emptied it last (another's worker may exit while ours runs). Appeared, it is
        # explained only by another cluster's scopes under it.
        if obj in before.cgroups and obj not in after.cgroups:
            return True
        others = {c for c in before.cgroups | after.cgroups if c.startswith(obj + "/")}
        return bool(others)
    if kind == "mounts":
        _source, point, _type = obj.split(" ")
        if point.startswith("/run/netns/"):
            return FOREIGN_NAME.match(point.removeprefix("/run/netns/")) is not None
        # Other tests' machines and disks live in their own directories under /tmp;
        # buildah and podman (other tests' builds and pushes) mount under their own
        # storage, where bodega never mounts: its first use on a host binds the overlay
        # directory onto itself for good, and a build mounts its container's root there.
        return point.startswith(("/tmp/", CONTAINERS_STORAGE))
    if kind == "nft_tables":
        # Workers' fences; the test kits make theirs in namespaces.
        return FOREIGN_TABLE.match(obj) is not None
    return False


def _cgroups() -> list[str]:
    found = []
    for hierarchy in sorted(CGROUP.iterdir()) if CGROUP.is_dir() else []:
        top = hierarchy / "bodega"
        if not top.is_dir() or hierarchy.is_symlink():
            continue
        found.append(f"{hierarchy.name}/bodega")
        # os.walk, not rglob: another cluster on this host removes its cgroups while the walk
        # goes, and a directory gone by the time it is listed is one fewer, not an error.
        for where, dirs, _files in os.walk(top):
            base = Path(where).relative_to(hierarchy)
            found += [f"{hierarchy.name}/{base / name}" for name in dirs]
    return found


def _run_files() -> list[str]:
    found = []
    for pattern in ("subnets/*", "netns/*", "runc/*", "runc/*/*"):
        found += [str(p.relative_to(RUN)) for p in RUN.glob(pattern)]
    return found


def _out(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout
