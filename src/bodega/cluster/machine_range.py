"""One cluster per machine subnet on a host: ``bodega up`` claims its /24s while it runs.

Worker i takes the (i+1)-th /24 of ``--machine-cidr`` and, as root, names its
bridge and namespaces after that /24 (``bdg-209-1``, ``bodega-209-1-N``). Two
clusters on one host with overlapping ranges would share those names and tear
down each other's machines' networks. So ``bodega up`` takes an exclusive lock
(flock) per /24 under ``/run/bodega/subnets``, held while it runs and dropped by
the kernel when it dies, however it dies.

A /24 another cluster holds is refused at once, in one line naming
``--machine-cidr`` and a free range to use instead. It is not moved silently:
machines a data dir already has keep their addresses in the workers' state, and a
range that changed under them would surprise more than a refusal does.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

LOCK_DIR = Path("/run/bodega/subnets")
SUGGESTIONS_TRIED = 64


class MachineRangeTaken(ValueError):
    """One line: whose cluster has the range, and the flag (and a value) to move ours."""


@dataclass
class RangeClaim:
    fds: list[int] = field(default_factory=list)

    def release(self) -> None:
        for fd in self.fds:
            os.close(fd)  # closing drops the flock
        self.fds.clear()


def lock_path(lock_dir: Path, subnet: str) -> Path:
    return lock_dir / (subnet.replace("/", "-") + ".lock")


def _try_lock(path: Path) -> int | None:
    """An fd holding ``path``'s exclusive lock, or None if another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _holder(path: Path) -> str:
    try:
        who = json.loads(path.read_text())
        return f"the bodega cluster in {who['data_dir']} (pid {who['pid']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another bodega cluster"


def same_size_ranges(cidr: str) -> Iterator[str]:
    """Ranges of ``cidr``'s size after it in 10.0.0.0/8, wrapping round: where to move to."""
    network = ipaddress.ip_network(cidr)
    private = ipaddress.ip_network("10.0.0.0/8")
    if network.version != 4 or not network.subnet_of(private):  # type: ignore[arg-type]
        return
    siblings = list(private.subnets(new_prefix=network.prefixlen))
    start = siblings.index(network)
    for step in range(1, len(siblings)):
        yield str(siblings[(start + step) % len(siblings)])


def claim(cidr: str, subnets: list[str], data_dir: Path, lock_dir: Path = LOCK_DIR) -> RangeClaim:
    """Lock every /24 in ``subnets`` for this process, or raise ``MachineRangeTaken``."""
    held = RangeClaim()
    for subnet in subnets:
        path = lock_path(lock_dir, subnet)
        fd = _try_lock(path)
        if fd is None:
            held.release()
            instead = suggestion(cidr, len(subnets), lock_dir)
            raise MachineRangeTaken(
                f"machine range {cidr} overlaps {subnet}, used by {_holder(path)}; give this "
                "cluster another range with --machine-cidr"
                + (f", e.g. --machine-cidr {instead}" if instead else ""))
        held.fds.append(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"data_dir": str(data_dir), "pid": os.getpid()}).encode(), 0)
    return held


def suggestion(cidr: str, workers: int, lock_dir: Path = LOCK_DIR) -> str | None:
    """A range of the same size whose first ``workers`` /24s no cluster holds now."""
    for index, candidate in enumerate(same_size_ranges(cidr)):
        if index >= SUGGESTIONS_TRIED:
            return None
        subnets = list(ipaddress.ip_network(candidate).subnets(new_prefix=24))[1:workers + 1]
        if all(not lock_path(lock_dir, str(s)).exists() or _free(lock_path(lock_dir, str(s)))
               for s in subnets):
            return candidate
    return None


def _free(path: Path) -> bool:
    fd = _try_lock(path)
    if fd is None:
        return False
    os.close(fd)
    return True
