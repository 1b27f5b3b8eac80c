"""Ports for the servers a test starts: free now, and out of the kernel's ephemeral range.

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the
same range every outgoing connection on the host draws its local port from. A
test that picks such a port and gives it to a server seconds later can find it
taken by a connection made meanwhile (a busy host makes many). Ports picked
here lie below that range, so only another listener can take them, and each is
checked free for TCP and UDP (gossip ports double as both).

They lie below ``bodega up``'s own quiet range too (``port_claims``), where a
cluster picks its gossip and WireGuard ports and claims them until its
components bind them seconds later. A test process knows nothing of those
claims: a port picked from the same range could go to a test's server in that
gap, and a worker's WireGuard then finds its port taken.
"""

from __future__ import annotations

import os
import random
import socket

from bodega.cluster.port_claims import ephemeral_range, quiet_range

LOW = 10000


def _high() -> int:
    """Where bodega up's quiet range (or, without one, the ephemeral range) begins."""
    ephemeral = ephemeral_range()
    quiet = quiet_range(ephemeral)
    high = min(ephemeral[0], quiet.start if quiet is not None else ephemeral[0])
    if high - LOW < 2000:
        raise RuntimeError(f"no room for test ports below {high} (ip_local_port_range is "
                           f"{ephemeral[0]}-{ephemeral[1]})")
    return high


HIGH = _high()  # with Linux's default ephemeral range (32768-60999): 24768
_rng = random.Random()
_given: set[int] = set()


def _slice() -> range:
    """This test process's share of the range: xdist's workers each pick from their own
    slice, so two of them never hand out one port to two servers starting at once."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() and count > 1 else 0
    width = (HIGH - LOW) // max(count, 1)
    return range(LOW + index * width, LOW + (index + 1) * width)


def is_free(port: int) -> bool:
    """No listener holds ``port`` now, TCP or UDP."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A port no listener holds now, TCP and UDP, outside the ephemeral range, and never
    one this process handed out before (a server given it may not have bound it yet)."""
    ports = _slice()
    for _ in range(1000):
        port = _rng.randrange(ports.start, ports.stop)
        if port not in _given and is_free(port):
            _given.add(port)
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop}")
