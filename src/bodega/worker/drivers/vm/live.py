"""A running VM's live move: its memory and devices from the source's qemu to a qemu the
target started for it, while the guest runs (qemu's pre-copy migration).

The target's import stages the move (``Arrival``, in the machine's vm directory): its
start then makes a blank root disk of the source's size and runs qemu with the source's
MAC and ``-incoming defer``, the namespace's ``eth0`` given that MAC so the guest's
frames still reach it. The source's qemu migrates to a Unix socket of its own worker
(``migrate_out``), which relays the stream over the workers' mTLS API into a Unix socket
the target's qemu listens on (``migrate_in``: ``migrate-incoming``); no port is opened
between hosts. Once the migration completed, the source's vCPUs are stopped for good and
its root disk (what the guest wrote over the image, made one file: ``flat_disk``) goes
over; the target writes it in place of the blank one, whose blocks its qemu has not
activated yet (``late-block-activate``: they are read afresh at ``cont``), lets the VM
run, and gives the guest its new addresses over the init's signal line (``arrive``).
``core/migration.py`` decides each step from what each qemu says, so a worker killed
anywhere repeats only the step it was in.

Two workers of one host share ``qemu.CONTROL_DIR``: before the target's qemu binds the
machine's sockets there, the source's are renamed aside (``set_aside``), a bound Unix
socket's name being only a name, and its worker reaches its qemu there until the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from bodega.runtime.commands import run_command
from bodega.runtime.waits import within
from bodega.worker.drivers.base import DriverError
from bodega.worker.drivers.vm.arrivals import leaving_qmp, remove
from bodega.worker.drivers.vm.core.migration import (
    ArrivalStep,
    LiveStep,
    Migration,
    arrival_step,
    live_step,
)
from bodega.worker.drivers.vm.core.qemu import CONTROL_DIR, control_socket, qmp_socket
from bodega.worker.drivers.vm.signal_line import Offer, offer_until_taken
from bodega.worker.drivers.vm.snapshots import QMP_TIMEOUT, qmp, vm_state

log = logging.getLogger("bodega.worker.vm")
PIECE = 256 * 1024
MIGRATION_TIMEOUT = 600.0  # seconds a live migration may take, pre-copy rounds and all
BANDWIDTH = 1 << 30  # bytes a second qemu may send (its default, 128 MiB/s, is a WAN's)
DOWNTIME_LIMIT_MS = 300  # qemu's own default: the pause it aims its last round at


async def disk_bytes(root: Path) -> int:
    """The virtual size of the VM's root disk (its qemu holds it: read shared)."""
    done = await run_command("qemu-img", "info", "-U", "--output=json", str(root))
    if done.returncode != 0:
        raise DriverError(f"qemu-img info: {done.stderr.decode(errors='replace').strip()}")
    return int(json.loads(done.stdout)["virtual-size"])


async def flat_disk(root: Path, out: Path) -> None:
    """``root`` and the image under it as one qcow2 (only what is not zero)."""
    remove(out)
    done = await run_command("qemu-img", "convert", "-U", "-O", "qcow2", str(root), str(out))
    if done.returncode != 0:
        raise DriverError(f"qemu-img convert: {done.stderr.decode(errors='replace').strip()}")


async def read_file(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as source:
        while piece := await asyncio.to_thread(source.read, PIECE):
            yield piece


async def ended(socket: Path, seconds: float) -> Migration:
    """Until the migration under way in or out of ``socket``'s qemu ends; how it ended."""
    async def polled() -> Migration:
        while True:
            [answer] = await qmp(socket, ("query-migrate", {}))
            migration = Migration.model_validate(answer.returned)
            if not migration.under_way:
                return migration
            await asyncio.sleep(0.02)
    try:
        return await within(polled(), seconds)
    except TimeoutError:
        raise DriverError(f"the VM's migration took over {seconds:.0f}s") from None


Upload = Callable[[AsyncIterator[bytes]], Awaitable[None]]


async def migrate_out(machine_id: str, machine_dir: Path, send: Upload) -> Migration:
    """The source: its running VM migrated through ``send`` (the relay to the target)
    until its state is all there; the completed migration (its ``downtime``). A
    ``DriverError`` says why it failed: the guest then runs on here."""
    socket = leaving_qmp(machine_id, machine_dir)
    for _ in range(len(LiveStep) + 1):
        step = live_step(*await vm_state(socket))
        match step:
            case LiveStep.SWITCH:
                [answer] = await qmp(socket, ("query-migrate", {}))
                return Migration.model_validate(answer.returned)
            case LiveStep.WAIT:
                await ended(socket, MIGRATION_TIMEOUT)
            case LiveStep.CONT:
                await qmp(socket, ("cont", {}))
            case LiveStep.MIGRATE:
                migration = await _relayed(machine_id, socket, send)
                if migration.status != "completed":
                    raise DriverError(f"the VM's migration {migration.status}" + (
                        f": {migration.error_desc}" if migration.error_desc else ""))
    raise DriverError("the VM's migration did not settle")


async def _relayed(machine_id: str, socket: Path, send: Upload) -> Migration:
    relay = CONTROL_DIR / f"{machine_id}.out"
    relay.unlink(missing_ok=True)
    came: asyncio.Future[asyncio.StreamReader] = asyncio.get_running_loop().create_future()
    writers: list[asyncio.StreamWriter] = []

    def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        if not came.done():
            came.set_result(reader)

    server = await asyncio.start_unix_server(accepted, path=str(relay))
    try:
        await qmp(socket, ("migrate-set-parameters", {"max-bandwidth": BANDWIDTH,
                                                      "downtime-limit": DOWNTIME_LIMIT_MS}),
                  ("migrate", {"uri": f"unix:{relay}"}))
        reader = await within(came, QMP_TIMEOUT)

        async def stream() -> AsyncIterator[bytes]:
            while piece := await reader.read(PIECE):
                yield piece

        try:
            await send(stream())
        except Exception:
            with contextlib.suppress(DriverError):
                await qmp(socket, ("migrate_cancel", {}))
            raise
        return await ended(socket, MIGRATION_TIMEOUT)
    finally:
        for writer in writers:
            writer.close()
        server.close()
        relay.unlink(missing_ok=True)


async def answering(socket: Path, seconds: float = QMP_TIMEOUT) -> None:
    """Until a qemu answers on ``socket`` (one just started binds it a moment later)."""
    async def tried() -> None:
        while True:
            try:
                await qmp(socket)
                return
            except DriverError:
                await asyncio.sleep(0.05)
    try:
        await within(tried(), seconds)
    except TimeoutError:
        raise DriverError(f"the VM's qemu did not answer in {seconds:.0f}s") from None


async def migrate_in(machine_id: str, chunks: AsyncIterator[bytes]) -> Migration:
    """The target: the stream the source relays, into its waiting qemu; the migration as
    it ended here. Its blocks stay inactive until ``arrive`` lets the VM run."""
    socket = qmp_socket(machine_id)
    await answering(socket)
    step = arrival_step(*await vm_state(socket))
    if step is not ArrivalStep.LISTEN:
        raise DriverError(f"the VM here takes no state now ({step})")
    inlet = CONTROL_DIR / f"{machine_id}.in"
    inlet.unlink(missing_ok=True)
    await qmp(socket, ("migrate-set-capabilities", {"capabilities": [
                  {"capability": "late-block-activate", "state": True}]}),
              ("migrate-incoming", {"uri": f"unix:{inlet}"}))
    try:
        _, writer = await within(asyncio.open_unix_connection(str(inlet)), QMP_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise DriverError(f"the VM's qemu does not listen for its state: {exc}") from exc
    try:
        async for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
    except OSError as exc:
        raise DriverError(f"the VM's qemu stopped taking its state: {exc}") from exc
    finally:
        writer.close()
        inlet.unlink(missing_ok=True)
    return await ended(socket, MIGRATION_TIMEOUT)


async def arrive(machine_id: str, root: Path, disk: AsyncIterator[bytes],
                 readdress: Callable[[], Awaitable[tuple[str, ...]]]) -> bool:
    """The target: the source's root disk in place of the blank one and the VM let run,
    its guest given this namespace's addresses (``readdress``: the words of the init's
    ``address`` line). False if the VM ran here already (an earlier try's)."""
    socket = qmp_socket(machine_id)
    step = arrival_step(*await vm_state(socket))
    if step is ArrivalStep.RUNS:
        async for _ in disk:
            pass
    elif step is ArrivalStep.CONT:
        await _in_place(root, disk)
        await qmp(socket, ("cont", {}))
    else:
        raise DriverError(f"the VM's state has not all come ({step})")
    offer = Offer(0, verb="address", words=await readdress())
    try:
        reader, writer = await within(
            asyncio.open_unix_connection(str(control_socket(machine_id))), QMP_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise DriverError(f"the VM's signal line: {exc}") from exc

    async def write(line: bytes) -> None:
        writer.write(line)
        await writer.drain()

    try:
        if not await offer_until_taken(reader, write, offer, offered_for=QMP_TIMEOUT):
            raise DriverError("the guest's init did not take its new addresses")
    except (EOFError, OSError) as exc:
        raise DriverError(f"the VM ended as it was given its addresses: {exc}") from exc
    finally:
        writer.close()
    return step is ArrivalStep.CONT


async def _in_place(root: Path, disk: AsyncIterator[bytes]) -> None:
    """``disk`` written over ``root``'s file, the one its qemu holds open (same inode)."""
    fd = await asyncio.to_thread(os.open, root, os.O_WRONLY)
    try:
        await asyncio.to_thread(os.ftruncate, fd, 0)
        async for chunk in disk:
            await asyncio.to_thread(_write_all, fd, chunk)
        await asyncio.to_thread(os.fsync, fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
