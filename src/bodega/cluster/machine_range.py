"""One cluster per machine subnet on a host: ``bodega up`` claims its /24s while it runs.

Worker i takes the (i+1)-th /24 of ``--machine-cidr``. Its bridge and
namespaces carry the cluster id, so two clusters never share them, but two
clusters routing the same addresses on one host would still clash in the host's
routing table. So ``bodega up`` takes an exclusive lock (flock) per /24 under
``/run/bodega/subnets``, held while it runs and dropped by the kernel when it
dies, however it dies. A stopping cluster removes its lock files; ``bodega
clean`` removes those a killed one left (``stale``).

Removing a lock file is safe against a racing claimer: the remover holds the
lock while it unlinks, and a claimer that locked a file after checks that the
path still names the file it locked, else it starts over on the new one.

A /24 another cluster holds is refused at once, in one line naming
``--machine-cidr`` and a free range to use instead. It is not moved silently:
machines a data dir already has keep their addresses in the workers' state, and a
range that changed under them would surprise more than a refusal does.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bodega.runtime.pid_lock import flock_holder, remove_unheld, try_flock

LOCK_DIR = Path("/run/bodega/subnets")
SUGGESTIONS_TRIED = 64


class MachineRangeTaken(ValueError):
    """One line: whose cluster has the range, and the flag (and a value) to move ours."""


@dataclass
class RangeClaim:
    held: list[tuple[Path, int]] = field(default_factory=list)

    def release(self) -> None:
        """Remove the lock files (still holding them), then drop the locks."""
        for path, fd in self.held:
            path.unlink(missing_ok=True)
            os.close(fd)  # closing drops the flock
        self.held.clear()


def lock_path(lock_dir: Path, subnet: str) -> Path:
    return lock_dir / (subnet.replace("/", "-") + ".lock")


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


def claim(cidr: str, subnets: list[str], data_dir: Path, cluster_id: str,
          lock_dir: Path = LOCK_DIR) -> RangeClaim:
    """Lock every /24 in ``subnets`` for this process, or raise ``MachineRangeTaken``."""
    held = RangeClaim()
    for subnet in subnets:
        path = lock_path(lock_dir, subnet)
        fd = try_flock(path)
        if fd is None:
            held.release()
            instead = suggestion(cidr, len(subnets), lock_dir)
            raise MachineRangeTaken(
                f"machine range {cidr} overlaps {subnet}, used by {_holder(path)}; give this "
                "cluster another range with --machine-cidr"
                + (f", e.g. --machine-cidr {instead}" if instead else ""))
        held.held.append((path, fd))
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"data_dir": str(data_dir), "pid": os.getpid(),
                                  "cluster_id": cluster_id}).encode(), 0)
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
    """Nobody holds ``path`` (or there is no such file); asking takes no lock."""
    return flock_holder(path) is None


def _content(path: Path) -> dict[str, object]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def stale(cluster_id: str | None, lock_dir: Path = LOCK_DIR) -> list[Path]:
    """Lock files no process holds that a cluster left: ``cluster_id``'s, or with None
    those of older versions (which wrote no cluster id)."""
    found = []
    for path in sorted(lock_dir.glob("*.lock")):
        if _content(path).get("cluster_id") == cluster_id and _free(path):
            found.append(path)
    return found


def held_subnets(lock_dir: Path = LOCK_DIR) -> list[str]:
    """The /24s a running cluster holds now."""
    return [path.name.removesuffix(".lock").replace("-", "/")
            for path in sorted(lock_dir.glob("*.lock")) if not _free(path)]


def remove_stale(paths: list[Path]) -> list[Path]:
    """Remove these lock files, each only while nobody holds it; returns those removed."""
    return remove_unheld(paths)
