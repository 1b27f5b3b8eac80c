"""The worker's end of a VM's signal line over a real Unix socket, against a scripted init
that takes nothing while it "boots": each offer is written until taken, one VM's offers go
one connection at a time in the order they were made, and a line no VM serves is said."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bodega.worker.drivers.vm.signal_line import SignalLine
from tests.poll_kit import until


@dataclass
class ScriptedInit:
    """qemu's end of the line and the init behind it: the first ``lost`` lines are lost
    (the port not open yet), then each ``signal ID N`` is answered and taken once."""

    lost: int
    lines: list[str] = field(default_factory=list)
    taken: list[tuple[str, int]] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while line := (await reader.readline()).decode():
                self.lines.append(line)
                if len(self.lines) <= self.lost:
                    continue
                word, *rest = line.split()
                if word == "signal":
                    offer_id, number = rest
                    writer.write(f"taken {offer_id}\n".encode())
                    await writer.drain()
                    if offer_id not in [i for i, _ in self.taken]:
                        self.taken.append((offer_id, int(number)))
        finally:
            self.open_now -= 1
            writer.close()


@contextlib.asynccontextmanager
async def scripted_init(socket: Path, lost: int) -> AsyncIterator[ScriptedInit]:
    init = ScriptedInit(lost)
    server = await asyncio.start_unix_server(init.serve, str(socket))
    try:
        yield init
    finally:
        server.close()


async def test_offers_are_written_until_taken_one_at_a_time_in_order(tmp_path: Path) -> None:
    socket = tmp_path / "m.ctl"
    line = SignalLine(resend_every=0.01, offered_for=30)
    async with scripted_init(socket, lost=5) as init:
        for signal in (10, 2, 15):
            assert await line.send("m", socket, signal)
        # An exec's wake does not wait behind the offers: it is sent again by its exec.
        assert not await line.tell("m", socket, "exec", unless_busy=True)
        await asyncio.gather(*line.offers)
        assert [number for _, number in init.taken] == [10, 2, 15]
        assert init.lines[:6] == [init.lines[0]] * 6, "the first offer written until taken"
        assert init.most_open == 1, "qemu serves one connection at a time"
        assert await line.tell("m", socket, "exec", unless_busy=True)
        await until(lambda: init.lines[-1] == "exec\n", what="the wake read")
    assert not line.locks, "no lock kept once the offers are done"


async def test_a_line_no_vm_serves_is_said_so(tmp_path: Path) -> None:
    line = SignalLine(resend_every=0.01, offered_for=30)
    gone = tmp_path / "gone.ctl"
    assert not await line.send("m", gone, 15)
    assert not await line.tell("m", gone, "15")
    assert not line.offers
    # A socket left by a qemu killed -9: nothing listens on it.
    stale = tmp_path / "stale.ctl"
    server = await asyncio.start_unix_server(lambda r, w: None, str(stale))
    server.close()
    await server.wait_closed()
    stale.touch()
    assert not await line.send("m", stale, 15)
