"""A machine's create on its worker, from the call to the commit: one module.

    MachineCreation.create ─▶ what only this worker can refuse (its driver's needs)
        └▶ Lifecycle.run_grouped ─▶ record_machine, in the group's transaction:
               an earlier try (idempotency key, or the id), a free name, room claimed
               (or a reservation), the volume, an address, the core's decision, the rows
        └▶ answered once the group is on disk (state ``created``; the start runs on)

An earlier try is found by one rule (``earlier_try``: the idempotency key, or the id),
applied in the transaction that commits the create, so two tries that race both see the
one that committed first; only a retry whose machine's lock is held (its first try's
start may hold it for a while) is answered from it before, instead of waiting. A machine's name
and id are checked where they cross the wire (``wire/internal/worker_calls.py``), not again here.

The worker acts on the body it was sent (``CreateMachineBody``), not a copy of it: only
its own region and the owner the call came with are added, as arguments. What the
machine asks of the host (``Ask``) is worked out once, here, for the room made and the
room claimed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, Conflict
from bodega.model.ids import new_machine_id, new_machine_name, new_ulid
from bodega.model.machine_config import MachineConfig
from bodega.model.refusals import NoRoom
from bodega.model.states import MachineState
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.core.decisions import Create, Decision
from bodega.worker.core.records import MachineRow
from bodega.worker.core.rules import decide
from bodega.worker.drivers.base import Driver, needs_command
from bodega.worker.host.network import WIRE_AHEAD, Network
from bodega.worker.ops.claims import attach_volume, claim_room
from bodega.worker.ops.lifecycle import Lifecycle
from bodega.worker.store import leases, queries
from bodega.worker.store.database import Store
from bodega.worker.store.ledger import CapacityRejected, Ledger


@dataclass
class Recorded:
    """What a create's transaction found or made: an earlier machine, or a lease's nonce."""

    earlier: MachineRow | None = None
    nonce: str | None = None


def free_address(conn: sqlite3.Connection, network: Network, ip_range: tuple[int, int],
                 launcher_waiting: Callable[[int], bool] = lambda _index: False) -> int | None:
    """Of the lowest free addresses: the first with a launcher waiting in its namespace (a
    start there only execs), else the first whose namespace is wired, else the lowest."""
    free = queries.free_ip_indexes(conn, *ip_range, WIRE_AHEAD + 1)
    for ready in (launcher_waiting, network.ready):  # the cheaper look first
        found = next((i for i in free if ready(i)), None)
        if found is not None:
            return found
    return free[0] if free else None


def earlier_try(conn: sqlite3.Connection, req: CreateMachineBody,
                machine_id: str) -> MachineRow | None:
    """The machine an earlier try of this create made: the same idempotency key in the app,
    or the same id (a broker derives it from the client's key); 409 for an id another app
    holds. None when this is the first try."""
    if req.idempotency_key:
        found = queries.machine_by_idempotency_key(conn, req.app, req.idempotency_key)
        if found is not None:
            return found
    found = queries.get_machine(conn, machine_id)
    if found is not None and found.app != req.app:
        raise Conflict(f"machine id {machine_id} is taken")
    return found


def record_machine(
    conn: sqlite3.Connection, req: CreateMachineBody, machine_id: str, name: str, ask: Ask,
    *, region: str, owner: str, ledger: Ledger, network: Network, ip_range: tuple[int, int],
    clock: Callable[[], float],
    outcome: Recorded, launcher_waiting: Callable[[int], bool] = lambda _index: False,
) -> Decision:
    """Record the machine (or find the one an earlier try made); the core's create decision."""
    rename = req.name is None or req.generated_name
    now = clock()
    outcome.earlier = earlier_try(conn, req, machine_id)
    if outcome.earlier is not None:
        return Decision()
    while queries.machine_name_taken(conn, req.app, name):
        if not rename:
            raise Conflict(f"a machine named {name!r} already exists in app {req.app}",
                           status="name_taken")
        name = new_machine_name()  # a made-up name collided: make up another
    claim_room(conn, ledger, req.reservation_id, ask, machine_id)
    volume_id = attach_volume(conn, req.app, req.config, machine_id, now)
    ip_index = free_address(conn, network, ip_range, launcher_waiting)
    if ip_index is None:
        raise CapacityRejected("could not reserve resource for machine: no free addresses",
                               details=NoRoom(full=True))  # room by the figures, yet full
    decision = decide(None, Create(launch=not req.skip_launch))
    instance_id = new_ulid(int(now * 1000))
    row = MachineRow(
        id=machine_id, app=req.app, name=name, region=region,
        state=str(decision.changes.state), instance_id=instance_id, config=req.config,
        millicpus=ledger.totals.millicpus_for(ask), memory_mb=ask.memory_mb,
        gpus=ask.gpus, gpu_kind=ask.gpu_kind, ip_index=ip_index,
        private_ip=network.address(ip_index),
        netns=None, cordoned=req.skip_service_registration,
        holds_compute=bool(decision.changes.holds_compute),
        handle=None, start_seq=0, restarts=0, volume_id=volume_id,
        placement_json=(None if req.placement is None
                        else req.placement.model_dump_json(exclude_none=True)),
        idempotency_key=req.idempotency_key, last_exit=None,
        created_at=now, updated_at=now,
    )
    queries.insert_machine(conn, row)
    queries.insert_version(conn, machine_id, instance_id,
                          req.config.model_dump_json(exclude_none=True), now)
    if req.lease_ttl:
        lease = leases.acquire(
            conn, machine_id, version=instance_id, ttl=req.lease_ttl, description="",
            owner=owner, nonce=None, now=now,
        )
        outcome.nonce = lease.nonce
    return decision


class MachineCreation:
    """The worker's create: ``create`` returns once the machine is durably recorded."""

    def __init__(self, store: Store, ledger: Ledger, lifecycle: Lifecycle, driver: Driver,
                 network: Network, ip_range: tuple[int, int], region: str,
                 worker: str | None = None) -> None:
        self.store = store
        self.region = region  # this worker's: every machine it creates is in it
        self.ledger = ledger
        self.lifecycle = lifecycle
        self.driver = driver
        self.network = network
        self.ip_range = ip_range
        self.worker = worker  # its name marks the ids it makes up (model/ids.py)

    async def create(self, req: CreateMachineBody, *,
                     owner: str = "bodega") -> tuple[MachineRow, str | None]:
        """Create (and unless ``skip_launch``, start) a machine; returns once it is recorded,
        with its lease's nonce if it asked for one: an earlier try's machine, if there was
        one (the same idempotency key or id), and no nonce. Without a reservation, room
        held by what gives way (idle warm slots) is made for it if it does not fit.
        ``owner``: the token that asked, kept as the machine's lease's owner."""
        ask = Ask.for_config(req.config)
        if req.reservation_id is not None:
            return await self._create(req, ask, owner)
        return await self.ledger.making_room(ask, lambda: self._create(req, ask, owner))

    async def _create(self, req: CreateMachineBody, ask: Ask,
                      owner: str) -> tuple[MachineRow, str | None]:
        if needs_command(self.driver.capabilities, req.config) and not req.config.command():
            raise BadRequest(
                f"the {self.driver.name} driver runs config.init.exec (or init.entrypoint + "
                "init.cmd, or processes[0].exec); none was given")
        machine_id = req.machine_id or new_machine_id(self.worker)
        name = req.name or new_machine_name()
        if req.machine_id is not None and self.lifecycle.locks.busy(machine_id):
            # A retry is answered at once: its first try's start may hold the machine (and
            # its lock) for as long as an image pull. Any other create looks for an earlier
            # try once, in the transaction that commits it (a retry that comes once the
            # first try's lock is free is found there).
            earlier = earlier_try(self.store.db, req, machine_id)
            if earlier is not None:
                return earlier, None
        coming = not req.skip_launch and self.start_coming(machine_id, req.config)
        recorded = Recorded()
        # The machine is durably created (its first step is committed): like the Machines
        # API, answer now, in state "created", and let the operation run on; clients /wait.
        # Creates that come together share that commit and its fsync (``GroupCommit``).
        try:
            await self.lifecycle.run_grouped(machine_id, lambda conn: record_machine(
                conn, req, machine_id, name, ask, region=self.region, owner=owner,
                ledger=self.ledger, network=self.network,
                ip_range=self.ip_range, clock=self.store.clock, outcome=recorded,
                launcher_waiting=self._launcher_waiting))
        except Exception:  # refused (a cancelled call's commit may still land: kept)
            self._start_called_off(machine_id, coming)
            raise
        if recorded.earlier is not None:
            self._start_called_off(machine_id, coming)
            return recorded.earlier, None
        row = queries.get_machine(self.store.db, machine_id)
        assert row is not None  # just committed, and only a destroy removes a row
        return row, recorded.nonce

    def _launcher_waiting(self, index: int) -> bool:
        parking = self.driver.capabilities.parking
        namespace = self.network.namespace(index)
        return parking is not None and namespace is not None and parking.waiting(namespace)

    def start_coming(self, machine_id: str, config: MachineConfig) -> bool:
        """A machine of ``config`` starts in a few milliseconds: let the driver ready the host
        for it while this call commits (``drivers/process/warmup.py``). True if it did."""
        warmup = self.driver.capabilities.warmup
        return warmup is not None and warmup.start_coming(machine_id, config)

    def _start_called_off(self, machine_id: str, coming: bool) -> None:
        """The create that announced a start (``coming``) was refused: the driver undoes what
        it readied, unless a machine of that id exists after all (its cgroups are its own)."""
        warmup = self.driver.capabilities.warmup
        if not coming or warmup is None:
            return
        row = queries.get_machine(self.store.db, machine_id)
        if row is None or row.state == MachineState.DESTROYED:
            warmup.start_called_off(machine_id)
