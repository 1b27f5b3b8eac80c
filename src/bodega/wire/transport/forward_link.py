"""A port forward's relay, its ends, and the WebSocket links it is carried on.

Every hop of a forward (``bodega port-forward``: CLI, broker, worker) runs ``relay``
between two ends: a TCP stream (``StreamEnd``: the user's connection in the CLI,
the machine's in the worker), a WebSocket this side opened (``LinkEnd``: the CLI's
to the broker, the broker's to the worker), or one it accepted
(``wire/transport/forward_serve.py``). What each thing an end reports means is decided in
``model/forwarding.py``; here are only the reads, writes and closes.

``open_link`` opens a link with the ``websockets`` library (uvicorn serves bodega's
WebSockets with it too), not aiohttp, the daemons' HTTP client: a hop refuses a
forward before the upgrade with an answer in the error shape (a bad port's 400, a
stopped machine's 412, a refused connection's 503), and aiohttp's WebSocket client
drops the body of such an answer, keeping only its status. The message would be lost
on its way from the worker to the broker and on to the CLI; websockets' keeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl as ssllib
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from typing import Protocol
from urllib.parse import urlencode, urlsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from bodega.model.errors import BodegaError, Unavailable, Unreachable, from_wire
from bodega.model.forwarding import (
    CHUNK,
    MAX_FRAME,
    Deliver,
    Finish,
    Frame,
    Step,
    closing,
    on_chunk,
    on_close,
    on_failure,
    on_frame,
)

USER_AGENT = "bodega"
CLOSE_TIMEOUT = 5.0  # seconds a closing link waits for the peer's close frame


class End(Protocol):
    """One side of a relay; none of its methods raises for what its peer did."""

    async def read(self) -> Step: ...

    async def write(self, data: bytes) -> Finish | None:
        """Hand ``data`` on; a ``Finish`` if it could not be (the peer is gone)."""
        ...

    async def finish(self, how: Finish) -> None:
        """Close this side, telling it how the relay ended where it can be told."""
        ...


async def relay(a: End, b: End) -> Finish:
    """Carry bytes both ways until either end finishes, then finish both as it did; the
    first end's ``Finish`` is the answer. Cancelled, it leaves both ends to their owners."""

    async def pump(source: End, sink: End) -> Finish:
        while True:
            step = await source.read()
            if isinstance(step, Finish):
                return step
            if isinstance(step, Deliver):
                failed = await sink.write(step.data)
                if failed is not None:
                    return failed

    return await first_finish(a, b, pump(a, b), pump(b, a))


async def first_finish(a: End, b: End, *pumps: Coroutine[None, None, Finish]) -> Finish:
    """Run ``pumps`` (one each way) until one ends, cancel the rest, then finish both ends
    as it ended; that ``Finish`` is the answer."""
    tasks = [asyncio.create_task(pump) for pump in pumps]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    first = next(task for task in tasks if task in done).result()
    await asyncio.gather(a.finish(first), b.finish(first))
    return first


def why(exc: BaseException) -> str:
    """A few words on a failed connection or read ("connection refused")."""
    number = getattr(exc, "errno", None)
    if isinstance(number, int) and number:
        return os.strerror(number).lower()
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or exc.__class__.__name__


class StreamEnd:
    """A TCP connection's end: reads of at most ``CHUNK`` bytes; a clean relay's end
    closes it, a failed one's resets it, so the program on it sees the failure too."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 name: str) -> None:
        self.reader = reader
        self.writer = writer
        self.name = name

    async def read(self) -> Step:
        try:
            return on_chunk(await self.reader.read(CHUNK))
        except OSError as exc:
            return on_failure(self.name, why(exc))

    async def write(self, data: bytes) -> Finish | None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except OSError as exc:
            return on_failure(self.name, why(exc))
        return None

    async def finish(self, how: Finish) -> None:
        if how.failed:
            self.writer.transport.abort()
            return
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


class LinkEnd:
    """A WebSocket this side opened (``open_link``); ``name`` says who is at its far end."""

    def __init__(self, link: ClientConnection, name: str) -> None:
        self.link = link
        self.name = name

    def _closed(self, exc: ConnectionClosed) -> Finish:
        close = exc.rcvd
        return on_close(None if close is None else close.code,
                        "" if close is None else close.reason, peer=self.name)

    async def read(self) -> Step:
        try:
            message = await self.link.recv()
        except ConnectionClosed as exc:
            return self._closed(exc)
        if isinstance(message, str):
            return on_frame(Frame.TEXT, peer=self.name)
        return on_frame(Frame.BYTES, bytes(message))

    async def write(self, data: bytes) -> Finish | None:
        try:
            await self.link.send(data)
        except ConnectionClosed as exc:
            return self._closed(exc)
        return None

    async def finish(self, how: Finish) -> None:
        code, reason = closing(how)
        await self.link.close(code, reason)


def socket_url(base_url: str, path: str, query: Sequence[tuple[str, str]] = ()) -> str:
    """The WebSocket URL of ``path`` on the HTTP API at ``base_url`` (https: wss)."""
    parts = urlsplit(base_url.rstrip("/"))
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    return f"{scheme}://{parts.netloc}{parts.path}{path}" + (
        f"?{urlencode(list(query))}" if query else "")


def refusal(status: int, body: bytes, what: str) -> BodegaError:
    """A hop's refusal of the upgrade, rebuilt from its error shape (``{"error", "status"}``)
    so it can be told on, or said in one line."""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or "error" not in doc:
        doc = {"error": f"{what} refused the forward (HTTP {status})"}
    return from_wire(status, doc)


@contextlib.asynccontextmanager
async def open_link(url: str, *, what: str, headers: Mapping[str, str] | None = None,
                    tls: ssllib.SSLContext | None = None,
                    timeout: float = 10.0) -> AsyncIterator[ClientConnection]:
    """A WebSocket to ``url`` (``what``: who answers there, for messages), closed on leaving;
    a refusal raises the ``BodegaError`` it carried, no connection ``Unreachable``."""
    # wss: the context given, else one checking the system's CAs; ws: none.
    secure: ssllib.SSLContext | bool | None = (tls or True) if url.startswith("wss:") else None
    try:
        link = await connect(url, additional_headers=dict(headers or {}), open_timeout=timeout,
                             proxy=None, compression=None, max_size=MAX_FRAME,
                             user_agent_header=USER_AGENT, close_timeout=CLOSE_TIMEOUT,
                             ssl=secure)
    except InvalidStatus as exc:
        raise refusal(exc.response.status_code, bytes(exc.response.body), what) from None
    except (OSError, TimeoutError) as exc:
        reason = why(exc)
        raise Unreachable(f"{what} unreachable ({reason})", url=url, reason=reason) from None
    except WebSocketException as exc:
        raise Unavailable(f"{what}: no WebSocket ({exc})") from None
    try:
        yield link
    finally:
        link.transport.abort()  # closed by the relay already, or given up on
