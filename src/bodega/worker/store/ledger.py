"""The capacity ledger: the only authority over this host's resources.

What is committed is summed from the tables, never kept as a counter:
machines that hold compute, plus unexpired unclaimed reservations, plus
volumes' disk. A machine starts holding only in a transaction that checked
room for it (create claiming a reservation, start, update) and stops holding
when it comes to rest without a process (stopped, failed, destroyed). Each
check-and-claim is one transaction that runs without yielding to the event
loop, inside ``BEGIN IMMEDIATE``, so no interleaving of reserves, creates,
starts and destroys can exceed the totals. A reservation nobody claims simply
stops counting when its TTL passes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from bodega.model.capacity import Ask, Totals, Usage, describe_free, shortfalls
from bodega.model.errors import Conflict
from bodega.model.ids import new_token_id
from bodega.model.refusals import NoRoom
from bodega.model.rows import Free
from bodega.wire.internal.worker_calls import Capacity
from bodega.worker.core.records import ReservationRow
from bodega.worker.store import queries
from bodega.worker.store.database import Store

CORDON_MESSAGE = "deploys to this host are temporarily disabled"
T = TypeVar("T")


class CapacityRejected(Conflict):
    """This host cannot take the ask; ``details`` carries what it has free."""

    status = "insufficient_capacity"


def usage(conn: sqlite3.Connection, now: float, exclude_machine: str | None = None) -> Usage:
    params: list[Any] = []
    exclude = ""
    if exclude_machine is not None:
        exclude = " AND id != ?"
        params.append(exclude_machine)
    mcpu, memory = conn.execute(
        "SELECT coalesce(sum(millicpus), 0), coalesce(sum(memory_mb), 0) FROM machines "
        f"WHERE holds_compute = 1{exclude}",
        params,
    ).fetchone()
    gpus: dict[str, int] = {}
    for kind, count in conn.execute(
        "SELECT coalesce(gpu_kind, 'any'), sum(gpus) FROM machines "
        f"WHERE gpus > 0 AND holds_compute = 1{exclude} GROUP BY 1",
        params,
    ):
        gpus[kind] = gpus.get(kind, 0) + int(count)
    disk = 0
    for reservation in queries.live_reservations(conn, now):
        mcpu += reservation.millicpus
        memory += reservation.memory_mb
        disk += reservation.disk_gb
        if reservation.gpus:
            kind = reservation.gpu_kind or "any"
            gpus[kind] = gpus.get(kind, 0) + reservation.gpus
    (volume_disk,) = conn.execute(
        "SELECT coalesce(sum(size_gb), 0) FROM volumes WHERE state != 'destroyed'"
    ).fetchone()
    return Usage(millicpus=int(mcpu), memory_mb=int(memory), disk_gb=int(disk + volume_disk),
                 gpus=gpus)


async def _no_room(_ask: Ask, _exclude_machine: str | None) -> bool:
    return False


class Ledger:
    def __init__(self, store: Store, totals: Totals, default_ttl: float = 10.0) -> None:
        self.store = store
        self.totals = totals
        self.default_ttl = default_ttl  # seconds an unclaimed reservation holds its room
        # Disk the worker's image cache takes (whole GB, rounded up): it counts as used.
        self.image_disk_gb: Callable[[], int] = lambda: 0
        # Room held by machines that give way to any machine that needs it (idle warm
        # slots): shown as free, and made free by ``make_room`` when an ask does not fit.
        self.giving_way: Callable[[], list[Ask]] = list
        # (ask, the machine whose own room counts for it: an update) -> whether room went
        self.make_room: Callable[[Ask, str | None], Awaitable[bool]] = _no_room

    async def making_room(self, ask: Ask, attempt: Callable[[], Awaitable[T]],
                          exclude_machine: str | None = None) -> T:
        """``attempt`` (a reserve, create, start or update that checks room for ``ask``);
        refused for room, it is tried once more after what gives way has made room."""
        try:
            return await attempt()
        except Conflict as exc:
            if not await self.made_room(exc, ask, exclude_machine):
                raise
        return await attempt()

    async def made_room(self, refused: Conflict, ask: Ask,
                        exclude_machine: str | None = None) -> bool:
        """For a call ``refused`` for room (an update's refusal is a plain Conflict of the
        same status): whether what gives way made room, so that it is worth a second try."""
        return refused.status == CapacityRejected.status and \
            await self.make_room(ask, exclude_machine)

    @property
    def cordoned(self) -> bool:
        return self.store.get_meta("cordoned") == "1"

    @property
    def cordon_reason(self) -> str | None:
        """Why the host is cordoned (``draining`` while a drain moves its machines off), kept
        in the store beside the cordon so a restart keeps both; None when uncordoned or
        cordoned with no reason."""
        if not self.cordoned:
            return None
        return self.store.get_meta("cordon_reason") or None

    def set_cordoned(self, cordoned: bool, reason: str | None = None) -> None:
        with self.store.tx() as conn:
            self.store.set_meta(conn, "cordoned", "1" if cordoned else "0")
            self.store.set_meta(conn, "cordon_reason", (reason or "") if cordoned else "")
            self.store.append(
                conn, op_id="host", resource_id="host", fsm="host",
                step="cordon" if cordoned else "uncordon",
                payload={"reason": reason} if cordoned and reason else {},
            )

    def usage(self, exclude_machine: str | None = None) -> Usage:
        return self._with_images(usage(self.store.db, self.store.clock(), exclude_machine))

    def _with_images(self, used: Usage) -> Usage:
        images = self.image_disk_gb()
        return replace(used, disk_gb=used.disk_gb + images) if images else used

    def check_room(
        self, conn: sqlite3.Connection, ask: Ask, exclude_machine: str | None = None
    ) -> None:
        """Raise ``CapacityRejected`` unless ``ask`` fits beside what is committed."""
        used = self._with_images(usage(conn, self.store.clock(), exclude_machine))
        reasons = shortfalls(self.totals, used, ask)
        if reasons:
            raise CapacityRejected(
                "could not reserve resource for machine: " + "; ".join(reasons),
                details=NoRoom(free=self.free(used), asked=ask),
            )

    def may_fit(self, ask: Ask, exclude_machine: str | None = None,
                freed: list[Ask] | None = None) -> bool:
        """Whether ``ask`` fits now (beside what is held but ``exclude_machine``'s own room,
        and with ``freed`` given back), read without a transaction: a hint that spares a
        caller that tries often (a worker's probe queue, at every wake) a reserve sure to
        be refused, or idle slots stopped for nothing. Only ``reserve`` decides."""
        if self.cordoned:
            return False
        used = usage(self.store.db, self.store.clock(), exclude_machine)
        for gone in freed or []:
            used = used.minus(self.totals, gone)
        return not shortfalls(self.totals, used, ask)

    def reserve(self, ask: Ask, app: str, ttl: float) -> ReservationRow:
        """Atomically check room and record a claim that expires after ``ttl`` seconds."""
        with self.store.tx() as conn:
            if self.cordoned:
                raise CapacityRejected(CORDON_MESSAGE, status="cordoned")
            used = usage(conn, self.store.clock())
            reasons = shortfalls(self.totals, used, ask)
            if reasons:
                raise CapacityRejected(
                    "could not reserve resource for machine: " + "; ".join(reasons),
                    details=NoRoom(free=self.free(used), asked=ask),
                )
            now = self.store.clock()
            after = used.plus(self.totals, ask)
            gpu_kind = ask.gpu_kind
            if ask.gpus and gpu_kind is None:
                # Pin the kind Usage.plus chose so the reservation counts against it.
                gpu_kind = next(
                    (k for k, v in after.gpus.items() if v != used.gpus.get(k, 0)), None
                )
            row = ReservationRow(
                id=new_token_id("res"), app=app, ask=ask,
                millicpus=self.totals.millicpus_for(ask), memory_mb=ask.memory_mb,
                disk_gb=ask.disk_gb, gpus=ask.gpus, gpu_kind=gpu_kind,
                expires_at=now + ttl, claimed_by=None, created_at=now,
            )
            queries.insert_reservation(conn, row)
            self.store.append(
                conn, op_id=row.id, resource_id=row.id, fsm="reserve", step="reserved",
                payload={"app": app, "ask": ask.to_wire(), "expires_at": row.expires_at},
            )
            return row

    def release(self, reservation_id: str) -> bool:
        with self.store.tx() as conn:
            released = queries.delete_reservation(conn, reservation_id)
            if released:
                self.store.append(
                    conn, op_id=reservation_id, resource_id=reservation_id, fsm="reserve",
                    step="released", payload={},
                )
            return released

    def purge(self, older_than: float) -> int:
        with self.store.tx() as conn:
            return queries.purge_reservations(conn, older_than)

    def free(self, used: Usage) -> Free:
        totals = self.totals
        return Free(
            millicpus=totals.millicpus - used.millicpus,
            cpus=(totals.millicpus - used.millicpus) / 1000,
            memory_mb=totals.memory_mb - used.memory_mb,
            disk_gb=totals.disk_gb - used.disk_gb,
            gpus={k: v - used.gpus.get(k, 0) for k, v in totals.gpus.items()},
            summary=describe_free(totals, used),
        )

    def snapshot(self) -> Capacity:
        """What the host holds, as the registry shows it: room that gives way on demand
        counted free."""
        used = self.usage()
        for ask in self.giving_way():
            used = used.minus(self.totals, ask)
        return Capacity(
            totals=self.totals.row(), used=used.row(),
            free=self.free(used),
            cordoned=self.cordoned, cordon_reason=self.cordon_reason,
            reservations=len(queries.live_reservations(self.store.db, self.store.clock())),
        )

