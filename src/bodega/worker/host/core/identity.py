"""Which user a machine runs as: its own.

When the worker is root, machines run unprivileged. Were they all one user
(``nobody``), any machine could signal, trace or read the files of every
other machine on the host, whatever its app: same uid is all the kernel asks
for ``kill`` and ``ptrace``. So each machine gets a uid and gid of its own,
derived from its private address, which is unique in the cluster and stays
with the machine for its life (restarts, updates, a worker restart that
adopts it). The range starts far above any account a distribution creates.
A machine without a routable address of its own (host networking) keeps the
configured user: there every machine shares the host anyway.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from bodega.worker.drivers.process.launch import home

MACHINE_UID_BASE = 1 << 30
ADDRESS_BITS = 24  # the cluster's machines live in one /8 at most (a /24 per worker)


def machine_identity(configured: tuple[int, int] | None, private_ip: str | None
                     ) -> tuple[int, int] | None:
    """(uid, gid) for a machine, or None to keep the worker's own user."""
    if configured is None or not private_ip:
        return configured
    try:
        address = ipaddress.ip_address(private_ip)
    except ValueError:
        return configured
    if address.version != 4 or address.is_loopback or address.is_unspecified:
        return configured
    uid = MACHINE_UID_BASE + (int(address) & ((1 << ADDRESS_BITS) - 1))
    return uid, uid


def machine_home(configured: tuple[int, int] | None, machine_dir: Path,
                 private_ip: str | None) -> Path | None:
    """``launch.home`` as the upkeep knows a machine at rest: by its address, not a spec."""
    return home(machine_dir, machine_identity(configured, private_ip) is not None)
