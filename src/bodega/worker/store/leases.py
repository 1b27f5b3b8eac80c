"""Machine leases: a short exclusive claim that guards mutations (flyctl deploys take them).

While a lease is live, update, start, stop, restart, suspend, cordon,
uncordon, delete and exec need its nonce in the ``fly-machine-lease-nonce``
header; reads, metadata, signals and creates are not guarded. Refreshing with the
nonce keeps the same nonce, as clients expect.
"""

from __future__ import annotations

import secrets
import sqlite3

from bodega.model.errors import Conflict, NotFound
from bodega.worker.core.records import LeaseRow
from bodega.worker.store import queries

MAX_TTL = 3600
DEFAULT_TTL = 30


def live_lease(conn: sqlite3.Connection, machine_id: str, now: float) -> LeaseRow | None:
    lease = queries.get_lease(conn, machine_id)
    if lease is None or lease.expires_at <= now:
        return None
    return lease


def check(conn: sqlite3.Connection, machine_id: str, nonce: str | None, now: float) -> None:
    """Refuse a guarded mutation unless no lease is live or ``nonce`` is its nonce."""
    lease = live_lease(conn, machine_id, now)
    if lease is not None and lease.nonce != nonce:
        raise Conflict(
            f"failed_precondition: lease currently held by {lease.owner} on machine "
            f"{machine_id}; send its nonce in the fly-machine-lease-nonce header",
        )


def acquire(
    conn: sqlite3.Connection,
    machine_id: str,
    *,
    version: str,
    ttl: int,
    description: str,
    owner: str,
    nonce: str | None,
    now: float,
) -> LeaseRow:
    ttl = max(1, min(int(ttl), MAX_TTL))
    current = live_lease(conn, machine_id, now)
    if current is not None:
        if nonce != current.nonce:
            raise Conflict(
                f"aborted: lease currently held by {current.owner}, expires at "
                f"{int(current.expires_at)}",
            )
        lease = LeaseRow(machine_id, current.nonce, current.owner,
                         description or current.description, now + ttl, version)
    else:
        lease = LeaseRow(machine_id, secrets.token_hex(12), owner, description, now + ttl,
                         version)
    queries.put_lease(conn, lease)
    return lease


def get(conn: sqlite3.Connection, machine_id: str, now: float) -> LeaseRow:
    lease = live_lease(conn, machine_id, now)
    if lease is None:
        raise NotFound(f"lease not found for machine {machine_id}")
    return lease


def release(conn: sqlite3.Connection, machine_id: str, nonce: str | None, now: float) -> None:
    lease = live_lease(conn, machine_id, now)
    if lease is None:
        raise NotFound(f"lease not found for machine {machine_id}")
    if nonce != lease.nonce:
        raise Conflict(f"aborted: lease currently held by {lease.owner}; wrong or missing nonce")
    queries.delete_lease(conn, machine_id)
