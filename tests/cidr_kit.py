"""Address ranges for the clusters a test starts: one /16 (``10.<octet>.0.0/16``) per
cluster, held by this test process alone while it runs.

Tests run in several processes at once (pytest-xdist), and two clusters on one
machine range refuse each other. An octet is taken by an exclusive lock on a file
named for it (released by the kernel when the process ends, however it ends) and
only if no route of the host already uses it (a cluster an earlier, killed run
left). Each kind of test keeps its own span of octets, so what one leaves behind
is easy to tell from another's.
"""

from __future__ import annotations

import fcntl
import functools
import os
import random
import subprocess
from pathlib import Path

LOCKS = Path("/tmp/bodega-test-octets")
_held: dict[int, int] = {}  # octet -> the open lock file's descriptor, kept for good


def _routed() -> set[int]:
    done = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True,
                          check=False)
    found: set[int] = set()
    for line in done.stdout.splitlines():
        first = line.split()[0] if line.split() else ""
        parts = first.split(".")
        if len(parts) >= 2 and parts[0] == "10" and parts[1].isdigit():
            found.add(int(parts[1]))
    return found


def octet(lo: int, hi: int) -> int:
    """A second octet in ``[lo, hi)`` that no other test process holds and no route uses."""
    LOCKS.mkdir(mode=0o755, exist_ok=True)
    routed = _routed()
    candidates = [n for n in range(lo, hi) if n not in routed and n not in _held]
    random.shuffle(candidates)
    for n in candidates:
        fd = os.open(LOCKS / f"{n}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held[n] = fd
        return n
    # All taken: one this process took for a cluster that has gone since (no route left).
    for n in sorted(set(_held) - routed):
        if lo <= n < hi:
            return n
    raise RuntimeError(f"no free machine range among 10.{lo}-{hi - 1}.0.0/16")


@functools.cache
def held_octet(purpose: str, lo: int, hi: int) -> int:
    """One octet per purpose for this whole process, for kits that carve /24s out of it."""
    return octet(lo, hi)


def machine_cidr(lo: int, hi: int) -> str:
    return f"10.{octet(lo, hi)}.0.0/16"
