"""A machine's move between workers: the source's call and handoff, the target's import.

The source (``move``) begins ``move_machine`` under the machine's lock and waits for it
to end; its handoff step (``handoff``, the runner's effect) sends the record, its
versions and its history to the target until the target takes it (200) or refuses it
(400, 404, 409, 412: the move fails and the core rolls back). A target that does not
answer is asked again, with a pause that doubles up to ``HANDOFF_PAUSE``, for as long
as it takes: it may have taken the machine, and only its answer says so.

The target's import (``take``) is one ``BEGIN IMMEDIATE`` transaction, as a create is:
an earlier try of the same move (the same id and generation) is answered from the
record it made; room is checked (a reservation the broker made for the move is given
back first, in the same transaction), an address taken, the record written stopped
with the source's generation plus one, its versions and history copied and the move's
event logged; a machine that was running begins its start in that same commit.
``core/moves.py`` has the state machine and its diagram; a running VM's live move
(``live_moves.py``) rides on the same handoff. The module is long because both ends of
one handoff (what the source sends, what the target takes from it) are one protocol.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import shutil
import sqlite3
import ssl
import tarfile
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TypeVar

from bodega.model.capacity import Ask
from bodega.model.errors import BodegaError, Conflict
from bodega.model.ids import new_ulid
from bodega.model.machine import EventRequest
from bodega.model.refusals import NoRoom
from bodega.model.rows import WorkerRow
from bodega.model.rows.reads import TypedReads
from bodega.model.states import MachineState
from bodega.runtime.tls.contexts import InternalTls
from bodega.wire.internal.moves import (
    MOVE_WAIT,
    ImportMachineBody,
    MoveBody,
    MovedEntry,
    MovedVersion,
    MovedVolume,
    VolumeReceived,
)
from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.core.decisions import Decision, Move, Start, Then
from bodega.worker.core.payloads import MoveMachine
from bodega.worker.core.records import MachineRow, VolumeRow
from bodega.worker.core.rules import decide
from bodega.worker.host.volume_copy import tree_digest
from bodega.worker.ops.creation import free_address
from bodega.worker.ops.live_moves import LiveMoves
from bodega.worker.ops.machines import MachineService
from bodega.worker.ops.runner import EffectFailed, Outcome
from bodega.worker.store import queries, volume_queries
from bodega.worker.store.database import Operation
from bodega.worker.store.ledger import CORDON_MESSAGE, CapacityRejected
from bodega.worker.store.rows import parse_config

log = logging.getLogger("bodega.worker.moves")
T = TypeVar("T")

IMPORT = "import_machine"  # the target's import, as its failpoints name it
HANDOFF_PAUSE = 5.0  # at most, between two tries of a target that does not answer
HANDOFF_TIMEOUT = 30.0  # one try: the import is one transaction
HISTORY = 500  # the newest events handed over with the machine
REFUSED = frozenset({400, 404, 409, 412})  # the target's no: the move fails, rolled back


@dataclass(frozen=True)
class Moved:
    """How the source's move ended: the operation, and the target's refusal if it said one."""

    op: Operation
    refusal: BodegaError | None = None


class MachineMoves:
    def __init__(self, machines: MachineService, name: str, region: str,
                 tls: InternalTls | None) -> None:
        self.machines = machines
        self.store = machines.store
        self.name = name
        self.region = region
        self.config = machines.effects.config  # where volumes' data lives
        self.internal_tls = tls  # its client context read at each call: it is renewed
        self.refusals: dict[str, BodegaError] = {}  # by move id, until its caller reads it
        # The cluster's view, once the worker joins it: a target that came back at another
        # address is asked there.
        self.registry: TypedReads | None = None
        machines.effects.handoff = self.handoff  # the runner's effects of a move
        self.live = LiveMoves(self)  # a running VM's move: its memory with it

    @property
    def tls(self) -> ssl.SSLContext | None:
        return self.internal_tls.client if self.internal_tls is not None else None

    def url_of(self, worker: str) -> str | None:
        """Where ``worker`` serves, as the view says (None: not known)."""
        row = self.registry.get(WorkerRow, worker) if self.registry is not None else None
        return row.url if row is not None and row.url else None

    # -- the source ------------------------------------------------------------------------
    async def move(self, machine_id: str, body: MoveBody, nonce: str | None,
                   wait: float = MOVE_WAIT) -> Moved | None:
        """Begin the move and wait (at most ``wait`` seconds) for it to end; None if it
        runs on (its target does not answer yet)."""
        move_id = new_ulid(int(self.store.clock() * 1000))

        def body_(conn: sqlite3.Connection) -> Decision:
            row = self.machines._leased(conn, machine_id, nonce)
            return decide(row, Move(
                move_id=move_id, source=self.name, target=body.target,
                target_url=body.target_url, reason=body.reason,
                reservation_id=body.reservation_id, start=body.start,
                running_move=self._moving(machine_id) is not None))

        if self._moving(machine_id) is not None:
            raise Conflict(f"machine {machine_id} is being moved already", status="moving")
        await self.machines.lifecycle.run(machine_id, body_)
        row = self.store.db.execute(
            "SELECT op_id FROM operations WHERE resource_id = ? AND fsm = ? "
            "ORDER BY op_id DESC LIMIT 1", (machine_id, MoveMachine.fsm)).fetchone()
        op = None if row is None else self.store.operation(str(row[0]))
        if op is None or not isinstance(op.payload, MoveMachine) \
                or op.payload.move_id != move_id:
            raise Conflict(f"the move of machine {machine_id} did not begin")
        deadline = asyncio.get_running_loop().time() + wait
        while op.status == "running":
            if asyncio.get_running_loop().time() >= deadline:
                return None
            await asyncio.sleep(0.05)
            found = self.store.operation(op.op_id)
            assert found is not None
            op = found
        return Moved(op, self.refusals.pop(move_id, None))

    def _moving(self, machine_id: str) -> Operation | None:
        return next((op for op in self.store.running_operations()
                     if op.resource_id == machine_id and op.fsm == MoveMachine.fsm), None)

    async def handoff(self, op: Operation) -> Outcome:
        """The runner's effects of a move: the volume's data to the target (``copying``),
        the record (``handoff``), each until the target takes it or says no; the volume's
        data here removed once the target has it (``dropping``)."""
        move = op.payload
        if not isinstance(move, MoveMachine):
            raise EffectFailed(f"{op.fsm} at {op.step} carries no move")
        if op.step == "leaving":  # a live move's VM runs on: nothing to stop
            return Outcome()
        if op.step == "dropping":
            if move.volume_id:
                await asyncio.to_thread(shutil.rmtree, self.config.volume_dir(move.volume_id), True)
            return Outcome()
        row = queries.get_machine(self.store.db, op.resource_id)
        if row is None:
            raise EffectFailed(f"machine {op.resource_id} is not here")
        if op.step == "copying":
            return await self.ship(row, move)
        if op.step == "migrating":
            return await self.live.migrate(row, move)
        body = self.record(row, move)
        if move.live:  # the target's start waits for the VM's state (``live_moves.py``)
            body = body.model_copy(update={"live": await self.live.leaving(row)})
        try:
            await self.until_answered(row.id, move, lambda client: client.send(
                "POST", f"/v1/machines/{row.id}/import", body))
        except EffectFailed:
            if move.live:
                self.live.stays(row)
            raise
        return Outcome()

    def client(self, url: str, timeout: float = HANDOFF_TIMEOUT) -> WorkerClient:
        return WorkerClient(url, self.tls, timeout=timeout)

    async def ship(self, row: MachineRow, move: MoveMachine) -> Outcome:
        """The volume's data to the target as a tar, its digest checked against ours."""
        assert move.volume_id is not None
        source = self.config.volume_dir(move.volume_id)
        packed = await asyncio.to_thread(pack, source)
        _size, digest = await asyncio.to_thread(tree_digest, source)
        said = await self.until_answered(row.id, move, lambda client: client.exchange(
            "POST", f"/v1/machines/{row.id}/import-volume", encoded=packed,
            params={"volume_id": move.volume_id, "move_id": move.move_id}))
        theirs = VolumeReceived.model_validate_json(said or b"{}").digest
        if theirs != digest:
            raise EffectFailed(f"worker {move.target} holds volume {move.volume_id} as "
                               f"{theirs}, not {digest}")
        return Outcome(payload=replace(move, digest=digest))

    async def until_answered(self, machine_id: str, move: MoveMachine,
                              call: Callable[[WorkerClient], Awaitable[T]]) -> T:
        """``call`` of the target until it answers: a refusal fails the step."""
        pause, url = 0.2, move.target_url
        while True:
            try:
                async with WorkerClient(url, self.tls,
                                        timeout=HANDOFF_TIMEOUT) as client:
                    return await call(client)
            except BodegaError as exc:
                if exc.http_status in REFUSED:
                    self.refusals[move.move_id] = exc
                    raise EffectFailed(f"worker {move.target} refused the machine: "
                                       f"{exc.message}") from None
                said = exc.message
            except (OSError, TimeoutError) as exc:
                said = str(exc) or type(exc).__name__
            log.warning("%s: move to %s: the target does not take it yet (%s); again in "
                        "%.1f s", machine_id, move.target, said, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, HANDOFF_PAUSE)
            url = self.url_of(move.target) or url

    def record(self, row: MachineRow, move: MoveMachine) -> ImportMachineBody:
        """What the target is handed: the record, its versions, its newest events."""
        versions, history = self._versions(row.id), self._events(row.id)
        volume = None
        if move.volume_id is not None:
            held = volume_queries.get_volume(self.store.db, move.volume_id)
            if held is None:
                raise EffectFailed(f"volume {move.volume_id} is not here")
            volume = MovedVolume(
                id=held.id, name=held.name, size_gb=held.size_gb, encrypted=held.encrypted,
                fstype=held.fstype, snapshot_retention=held.snapshot_retention,
                auto_backup_enabled=held.auto_backup_enabled, created_at=held.created_at,
                digest=move.digest or "")
        return ImportMachineBody(
            move_id=move.move_id, source=self.name, generation=move.generation,
            start=move.was_running or move.start_there, reason=move.reason,
            reservation_id=move.reservation_id,
            id=row.id, app=row.app, name=row.name, instance_id=row.instance_id,
            config=row.config, cordoned=row.cordoned, start_seq=row.start_seq,
            restarts=row.restarts, placement=row.placement_json,
            idempotency_key=row.idempotency_key, created_at=row.created_at,
            updated_at=row.updated_at, versions=versions, history=history, volume=volume)

    def _versions(self, machine_id: str) -> list[MovedVersion]:
        rows = self.store.db.execute(
            "SELECT instance_id, config, created_at FROM versions WHERE machine_id = ? "
            "ORDER BY created_at", (machine_id,)).fetchall()
        return [MovedVersion(instance_id=str(r[0]), config=parse_config(str(r[1])),
                             created_at=float(r[2])) for r in rows]

    def _events(self, machine_id: str) -> list[MovedEntry]:
        entries = [e for e in self.store.history(machine_id, limit=100_000)
                   if e.event is not None][-HISTORY:]
        return [MovedEntry(op_id=e.op_id, fsm=e.fsm, step=e.step, payload=e.payload,
                           event=e.event, at=e.at) for e in entries]

    # -- the target ------------------------------------------------------------------------
    async def take(self, body: ImportMachineBody) -> MachineRow:
        """Import the machine a move hands over (idempotent by its id and generation)."""
        failpoints = self.machines.runner.failpoints  # the crash tests' (runtime/failpoints)
        failpoints.hit(IMPORT, "commit", "before")
        try:
            await self.machines.lifecycle.run(body.id, lambda conn: self._take(conn, body))
        except BodegaError:  # refused: the data it was sent first is not kept
            if body.live is not None:
                self.live.unstage(body)
            if body.volume is not None:
                staged = self._staged(body.volume.id)
                await asyncio.to_thread(shutil.rmtree, staged, True)
                staged.with_suffix(".digest").unlink(missing_ok=True)
            raise
        failpoints.hit(IMPORT, "commit", "after")  # taken, and its answer never sent
        row = queries.get_machine(self.store.db, body.id)
        assert row is not None  # just committed, or an earlier try's
        return row

    def _take(self, conn: sqlite3.Connection, body: ImportMachineBody) -> Decision:
        found = queries.get_machine(conn, body.id)
        if found is not None:
            if found.generation == body.generation and found.app == body.app:
                return Decision()  # an earlier try of this move took it
            raise Conflict(f"machine {body.id} is on worker {self.name} already",
                           status="moving")
        away = queries.moved_away(conn, body.id)
        if away is not None and away[1] >= body.generation:
            raise Conflict(f"machine {body.id} left worker {self.name} for {away[0]} since")
        ledger = self.machines.ledger
        if ledger.cordoned:
            raise CapacityRejected(CORDON_MESSAGE, status="cordoned")
        if body.reservation_id is not None:  # its room is the machine's now
            queries.delete_reservation(conn, body.reservation_id)
        ask = Ask.for_config(body.config)
        if body.volume is not None:  # its disk too, as a volume's create claims it
            ledger.check_room(conn, replace(ask, disk_gb=ask.disk_gb + body.volume.size_gb))
        else:
            ledger.check_room(conn, ask)
        if queries.machine_name_taken(conn, body.app, body.name):
            raise Conflict(f"a machine named {body.name!r} already exists in app {body.app}",
                           status="name_taken")
        network = self.machines.effects.network
        ip_index = free_address(conn, network, self.machines.ip_range)
        if ip_index is None:
            raise CapacityRejected("could not reserve resource for machine: no free addresses",
                                   details=NoRoom(full=True))
        now = max(self.store.clock(), body.updated_at + 0.001)  # newer than its last row
        row = MachineRow(
            id=body.id, app=body.app, name=body.name, region=self.region,
            state=str(MachineState.STOPPED), instance_id=body.instance_id, config=body.config,
            millicpus=ledger.totals.millicpus_for(ask), memory_mb=ask.memory_mb,
            gpus=ask.gpus, gpu_kind=ask.gpu_kind, ip_index=ip_index,
            private_ip=network.address(ip_index), netns=None, cordoned=body.cordoned,
            holds_compute=False, handle=None, start_seq=body.start_seq,
            restarts=body.restarts, placement_json=body.placement,
            volume_id=None if body.volume is None else body.volume.id,
            idempotency_key=body.idempotency_key, last_exit=None,
            created_at=body.created_at, updated_at=now, generation=body.generation)
        queries.insert_machine(conn, row)
        if body.live is not None:
            self.live.stage(body)
        if body.volume is not None:
            self._take_volume(conn, body, body.volume, now)
        for version in body.versions:
            queries.insert_version(conn, row.id, version.instance_id,
                                   version.config.model_dump_json(exclude_none=True),
                                   version.created_at)
        if row.instance_id not in {v.instance_id for v in body.versions}:
            queries.insert_version(conn, row.id, row.instance_id,
                                   row.config.model_dump_json(exclude_none=True), now)
        queries.replace_versions(conn, row.id, keep=row.instance_id)
        self._history(conn, row.id, body)
        conn.execute("DELETE FROM moved_away WHERE machine_id = ?", (row.id,))
        if body.start:
            return decide(row, Start())
        return Decision(then=frozenset({Then.SPARES_CHANGED}))

    def _take_volume(self, conn: sqlite3.Connection, body: ImportMachineBody,
                     volume: MovedVolume, now: float) -> None:
        """The volume's data received (``receive``) becomes the volume, attached."""
        if volume_queries.get_volume(conn, volume.id) is not None:
            raise Conflict(f"volume {volume.id} is on worker {self.name} already")
        staged, target = self._staged(volume.id), self.config.volume_dir(volume.id)
        if staged.exists():
            if staged_digest(staged) != volume.digest:
                raise Conflict(f"volume {volume.id}'s data here is not the one moved")
            shutil.rmtree(target, ignore_errors=True)
            staged.rename(target)  # in place before the commit; a retry finds it there
            staged.with_suffix(".digest").unlink()
        elif not target.exists() or tree_digest(target)[1] != volume.digest:
            raise Conflict(f"volume {volume.id}'s data never came here")
        volume_queries.insert_volume(conn, VolumeRow(
            id=volume.id, app=body.app, name=volume.name, region=self.region,
            size_gb=volume.size_gb, state="created", attached_machine_id=body.id,
            encrypted=volume.encrypted, fstype=volume.fstype,
            snapshot_retention=volume.snapshot_retention,
            auto_backup_enabled=volume.auto_backup_enabled, created_at=volume.created_at,
            updated_at=now, generation=body.generation))
        conn.execute("DELETE FROM moved_away WHERE machine_id = ?", (volume.id,))

    def _staged(self, volume_id: str) -> Path:
        return self.config.volumes_dir / f".incoming-{volume_id}"

    async def receive(self, volume_id: str, move_id: str, chunks: AsyncIterator[bytes]
                      ) -> VolumeReceived:
        """A moved volume's data, as a tar: unpacked beside the volumes (replacing what an
        earlier try left), and its digest, which the import checks again."""
        if volume_queries.get_volume(self.store.db, volume_id) is not None:
            raise Conflict(f"volume {volume_id} is on worker {self.name} already")
        staged = self._staged(volume_id)
        with tempfile.TemporaryFile(dir=staged.parent) as packed:
            async for chunk in chunks:
                packed.write(chunk)
            packed.seek(0)
            await asyncio.to_thread(unpack, packed, staged)
        size, digest = await asyncio.to_thread(tree_digest, staged)
        staged.with_suffix(".digest").write_text(digest)
        log.info("volume %s: received for move %s (%d bytes)", volume_id, move_id, size)
        return VolumeReceived(digest=digest, size=size)

    def _history(self, conn: sqlite3.Connection, machine_id: str,
                 body: ImportMachineBody) -> None:
        """The events it had, as they were, then the move's own."""
        for entry in body.history:
            conn.execute(
                "INSERT INTO ops (op_id, resource_id, fsm, step, payload, event, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (entry.op_id, machine_id, entry.fsm, entry.step,
                 json.dumps(entry.payload, separators=(",", ":")),
                 None if entry.event is None else json.dumps(entry.event, separators=(",", ":")),
                 entry.at))
        event = self.store.new_event("move", "moved", "user", EventRequest(
            reason=body.reason, moved_from=body.source, moved_to=self.name))
        self.store.append(conn, op_id=body.move_id, resource_id=machine_id, fsm="move",
                          step="moved", event=event, payload={
                              "from": body.source, "to": self.name,
                              "generation": body.generation})


def pack(root: Path) -> bytes:
    """A volume's directory as an uncompressed tar (modes, owners and links kept)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(root, arcname=".")
    return out.getvalue()


def unpack(packed: IO[bytes], target: Path) -> None:
    """A tar ``pack`` made, as ``target`` (whatever was there goes): nothing outside it."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tarfile.open(fileobj=packed, mode="r") as tar:
        tar.extractall(target, filter="tar")


def staged_digest(staged: Path) -> str:
    """The digest ``receive`` wrote beside the data it unpacked ("" if none)."""
    written = staged.with_suffix(".digest")
    return written.read_text().strip() if written.exists() else ""
