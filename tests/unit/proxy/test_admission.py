"""A machine takes an HAProxy slot once its port has accepted a connect from the proxy:
the pure rule (``layout.admitted``) and its I/O (``admission.py``) on real sockets."""

from __future__ import annotations

import asyncio
import socket

from bodega.proxy.haproxy.admission import Admission
from bodega.proxy.haproxy.core.layout import (
    EMPTY,
    AppServers,
    ServerSpec,
    admitted,
    endpoint,
    plan,
)


def spec(mid: str, port: int = 8080) -> ServerSpec:
    return ServerSpec(mid, "127.0.0.1", port, 0)


def test_a_machine_new_to_the_layout_waits_until_its_port_accepted() -> None:
    wanted = {"web": AppServers((spec("a"), spec("b")), (spec("c"),))}
    now, waiting = admitted(wanted, EMPTY, {endpoint(spec("a"))})
    assert now == {"web": AppServers((spec("a"),), ())}
    assert waiting == {endpoint(spec("b")), endpoint(spec("c"))}


def test_an_app_with_no_machine_ready_keeps_them_all() -> None:
    # Nowhere better to send its requests: HAProxy tries them, and the activator after.
    wanted = {"web": AppServers((spec("a"),), (spec("c"),)),
              "api": AppServers((spec("d"), spec("e")), ())}
    now, waiting = admitted(wanted, EMPTY, {endpoint(spec("e"))})
    assert now == {"web": wanted["web"], "api": AppServers((spec("e"),), ())}
    assert waiting == {endpoint(spec("d"))}


def test_a_machine_already_in_a_slot_stays_whatever_its_tier() -> None:
    layout = plan(EMPTY, {"web": AppServers((spec("a"),), ())}, "/m", "localhost").layout
    # a moves to the far tier: it is in a slot already, so no try holds it back
    now, waiting = admitted({"web": AppServers((), (spec("a"),))}, layout, set())
    assert now == {"web": AppServers((), (spec("a"),))}
    assert waiting == set()
    # the same machine at another address (moved) is new again
    moved, other = spec("a", port=9090), spec("b")
    now, waiting = admitted({"web": AppServers((moved, other), ())}, layout, {endpoint(other)})
    assert now == {"web": AppServers((other,), ())}
    assert waiting == {endpoint(moved)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_port_that_starts_listening_late_is_admitted_then() -> None:
    listening, late = free_port(), free_port()
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", listening)
    told = asyncio.Event()
    admission = Admission(told.set)
    wanted = {"web": AppServers((spec("up", listening), spec("late", late)), ())}
    try:
        # The one listening already is admitted in the same step; the other is not.
        assert await admission.admit(wanted, EMPTY) == {
            "web": AppServers((spec("up", listening),), ())}
        assert not told.is_set()
        second = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", late)
        try:
            await asyncio.wait_for(told.wait(), 10)
            assert await admission.admit(wanted, EMPTY) == wanted
        finally:
            second.close()
        # Gone from the wanted servers, it is forgotten: back, it is tried again.
        assert await admission.admit({"web": AppServers((spec("up", listening),), ())},
                                     EMPTY) == {"web": AppServers((spec("up", listening),), ())}
        assert endpoint(spec("late", late)) not in admission.accepting
    finally:
        server.close()
        await admission.stop()
