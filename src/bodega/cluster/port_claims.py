"""Ports ``bodega up`` picks for itself: outside the kernel's ephemeral range, claimed host-wide.

A port found free is free only until someone binds it, and a cluster's
components bind theirs seconds after ``bodega up`` chose them. Two things
could take a port in between (or, for a remembered one, between runs): any
process's outgoing socket, which the kernel gives a port from its ephemeral
range (``ip_local_port_range``), and a second ``bodega up`` choosing at the
same moment. So fresh ports come from just below the ephemeral range, where
the kernel never hands one out unasked, and each chosen port is claimed with
an exclusive lock (flock) under ``/run/bodega/ports``, held while ``bodega
up`` runs and dropped by the kernel when it dies, however it dies; another
``bodega up`` skips a claimed port. A claim names the network namespace it was
made in (a port is a namespace's, and hosts made of namespaces on one kernel,
each with a ``bodega up`` or ``bodega join`` on 51820, take it each in its
own). Without a writable ``/run/bodega`` (not root), ports are still chosen
outside the ephemeral range, unclaimed.

The lock is the claim's owner: a ``bodega up`` or ``bodega join`` that stops
removes its files; one killed with SIGKILL leaves them, held by nobody (``stale``),
and ``bodega clean`` removes those, never one a live process holds.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from bodega.runtime.pid_lock import flock_holder, remove_unheld, try_flock

LOCK_DIR = Path("/run/bodega/ports")
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
LINUX_EPHEMERAL = (32768, 60999)  # the kernel's default, when the file cannot be read
QUIET_SPAN = 8000  # how many ports below (or above) the ephemeral range to choose from
LOWEST = 1024  # never a privileged port
# What ``PortClaims.take`` names its files (claims made before they named a network
# namespace have no ``-net...``).
CLAIM = re.compile(r"(?:tcp|udp)-[0-9]+(?:-net[0-9]+)?\.lock")


def quiet_range(ephemeral: tuple[int, int], span: int = QUIET_SPAN) -> range | None:
    """Ports next to the ephemeral range, below it if there is room, else above it; None
    when it leaves no ``span`` ports either side."""
    low, high = ephemeral
    if low - LOWEST >= span:
        return range(low - span, low)
    if 65535 - high >= span:
        return range(high + 1, high + 1 + span)
    return None


def ephemeral_range(path: Path = EPHEMERAL) -> tuple[int, int]:
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return LINUX_EPHEMERAL
    return low, high


def candidates(rng: random.Random | None = None) -> list[int]:
    """Every port of this host's quiet range, shuffled (none: the kernel picks, see
    ``ports``): two clusters choosing at once rarely try the same port first."""
    found = quiet_range(ephemeral_range())
    if found is None:
        return []
    ports = list(found)
    (rng or random.Random()).shuffle(ports)
    return ports


@dataclass
class PortClaims:
    """The ports this process claimed; ``lock_dir`` None claims nothing (and refuses none)."""

    lock_dir: Path | None = LOCK_DIR
    held: dict[str, tuple[Path, int]] = field(default_factory=dict)

    @classmethod
    def here(cls) -> PortClaims:
        """Claims under ``/run/bodega/ports`` when it can be written, else none."""
        try:
            LOCK_DIR.mkdir(parents=True, exist_ok=True)
        except OSError:
            return cls(lock_dir=None)
        return cls() if os.access(LOCK_DIR, os.W_OK) else cls(lock_dir=None)

    def take(self, protocol: str, port: int) -> bool:
        """Claim ``protocol``/``port`` of this network namespace for this process; False if
        another process holds it."""
        key = f"{protocol}-{port}-net{network_namespace()}"
        if self.lock_dir is None or key in self.held:
            return True
        path = self.lock_dir / f"{key}.lock"
        fd = try_flock(path)
        if fd is None:
            return False
        self.held[key] = (path, fd)
        return True

    def release(self) -> None:
        """Remove the lock files (still holding them), then drop the locks."""
        for path, fd in self.held.values():
            path.unlink(missing_ok=True)
            os.close(fd)  # closing drops the flock
        self.held.clear()


def network_namespace() -> int:
    """This process's network namespace, by its inode (0 where /proc does not say)."""
    try:
        return os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return 0


def stale(lock_dir: Path = LOCK_DIR) -> list[Path]:
    """The claims no process holds: what a claimer killed with SIGKILL left."""
    try:
        listed = sorted(lock_dir.iterdir())
    except OSError:
        return []
    return [path for path in listed if CLAIM.fullmatch(path.name) and flock_holder(path) is None]


def remove_stale(paths: list[Path]) -> list[Path]:
    """Remove these claims, each only while nobody holds it; returns those removed."""
    return remove_unheld(paths)
