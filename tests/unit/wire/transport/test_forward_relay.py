"""The relay every hop of a port forward runs, over ends that are scripts (no sockets): bytes
go both ways in order, and the first end to finish finishes both, as it finished."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from bodega.model.forwarding import FAILED, NORMAL, Deliver, Finish, Step
from bodega.wire.transport.forward_link import relay, socket_url


class Scripted:
    """Reads its script's steps, then waits for more (``then``, run on each write, may add
    some); keeps what was written to it and how it was finished."""

    def __init__(self, *steps: Step, refuse: Finish | None = None,
                 then: Callable[[Scripted, bytes], None] | None = None) -> None:
        self.steps: asyncio.Queue[Step] = asyncio.Queue()
        for step in steps:
            self.steps.put_nowait(step)
        self.refuse = refuse
        self.then = then
        self.written: list[bytes] = []
        self.finished: list[Finish] = []

    async def read(self) -> Step:
        return await self.steps.get()

    async def write(self, data: bytes) -> Finish | None:
        if self.refuse is not None:
            return self.refuse
        self.written.append(data)
        if self.then is not None:
            self.then(self, data)
        return None

    async def finish(self, how: Finish) -> None:
        self.finished.append(how)


async def test_bytes_go_one_way_in_order_and_a_clean_end_finishes_both() -> None:
    client = Scripted(Deliver(b"one"), None, Deliver(b"two"), Finish(NORMAL, "bye"))
    machine = Scripted()
    finish = await relay(client, machine)
    assert finish == Finish(NORMAL, "bye")
    assert machine.written == [b"one", b"two"]
    assert client.finished == machine.finished == [Finish(NORMAL, "bye")]


async def test_bytes_come_back_the_other_way_and_that_end_may_finish_first() -> None:
    def echo(end: Scripted, data: bytes) -> None:
        end.steps.put_nowait(Deliver(data.upper()))
        if data == b"last":
            end.steps.put_nowait(Finish(FAILED, "the machine's connection: reset"))

    client = Scripted(Deliver(b"a"), Deliver(b"last"))
    machine = Scripted(then=echo)
    finish = await relay(client, machine)
    assert finish == Finish(FAILED, "the machine's connection: reset")
    assert finish.failed
    assert machine.written == [b"a", b"last"]
    assert client.written == [b"A", b"LAST"]
    assert client.finished == machine.finished == [finish]


async def test_an_end_that_cannot_take_bytes_finishes_both_as_it_said() -> None:
    gone = Finish(FAILED, "the connection from 127.0.0.1:5000: broken pipe")
    client = Scripted(refuse=gone)
    machine = Scripted(Deliver(b"answer"))
    assert await relay(client, machine) == gone
    assert client.finished == machine.finished == [gone]


async def test_a_relay_cancelled_leaves_its_ends_to_their_owners() -> None:
    client, machine = Scripted(Deliver(b"x")), Scripted()
    task = asyncio.create_task(relay(client, machine))
    while not machine.written:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.finished == machine.finished == []


@pytest.mark.parametrize(("base", "url"), [
    ("http://127.0.0.1:4280", "ws://127.0.0.1:4280/v1/x?port=5432"),
    ("https://api.example:443/", "wss://api.example:443/v1/x?port=5432"),
    ("https://[::1]:9/prefix", "wss://[::1]:9/prefix/v1/x?port=5432"),
])
def test_a_websocket_url_is_the_api_url_with_its_scheme(base: str, url: str) -> None:
    assert socket_url(base, "/v1/x", [("port", "5432")]) == url
