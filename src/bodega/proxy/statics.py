"""A request under one of an app's static ``url_prefix``es, answered from a worker.

    GET /static/site.css ─▶ statics table: the file, and the machines whose workers
    hold the image (started ones first) ─▶ worker: GET /v1/machines/{id}/statics/...
    ─▶ its answer relayed as it comes: 200 with the file, 304, 206, or its 404

The machine is never started, whatever its state, and the request is no load on
it: neither autostart nor autostop hears of it. A worker that cannot be reached
is passed for the next; with none left the answer is 503. Only ``GET`` and
``HEAD`` are the edge's; another method goes to the machines as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from bodega.proxy.core.statics import Lookup
from bodega.proxy.http1 import Head
from bodega.wire.internal.worker_client import WorkerClient
from bodega.wire.transport.seam import NoAnswer, NotConnected, Streamed

log = logging.getLogger("bodega.proxy.statics")

METHODS = (b"GET", b"HEAD")
# What a client's request says that the worker's answer depends on.
ASKED = (b"if-none-match", b"if-modified-since", b"range", b"if-range")
# What of the worker's answer the client gets.
RELAYED = ("content-type", "content-length", "etag", "last-modified", "accept-ranges",
           "content-range")
HEAD_TIMEOUT = 10.0  # seconds for a worker to begin its answer (it reads a local disk)
REASONS = {200: "OK", 206: "Partial Content", 304: "Not Modified", 404: "Not Found",
           416: "Range Not Satisfiable"}


class StaticServer:
    def __init__(self, clients: Callable[[str], WorkerClient | None]) -> None:
        self.clients = clients

    async def answer(self, lookup: Lookup, path: str, head: Head,
                     writer: asyncio.StreamWriter, request_id: str) -> tuple[bool, int, str]:
        """Answer ``head`` (its body already read) from the first worker that answers:
        (whether the client connection stays open, the status, and why none answered,
        "" when one did; then nothing was written, and the status is 503)."""
        headers = {name.decode(): value.decode("latin-1") for name in ASKED
                   if (value := head.get(name)) is not None}
        why = "no worker holds its image"
        for source in lookup.sources:
            client = self.clients(source.worker)
            if client is None:
                why = f"no address for worker {source.worker}"
                continue
            try:
                async with contextlib.AsyncExitStack() as stack:
                    # The answer's head is waited for so long; its body, as long as it takes.
                    async with asyncio.timeout(HEAD_TIMEOUT):
                        answer = await stack.enter_async_context(client.static(
                            source.machine_id, path, method=head.method.decode(),
                            app=source.app, headers=headers, timeout=None))
                        body = await _framed(answer)
                    return await self._relay(answer, body, head, writer, request_id,
                                             f"{source.app}: worker {source.worker}'s {path}")
            except (NotConnected, NoAnswer, TimeoutError) as exc:
                why = f"worker {source.worker} did not answer ({str(exc) or 'in time'})"
                log.info("%s: static %s: %s; trying another", source.app, path, why)
        return head.keep_alive(), 503, why

    async def _relay(self, answer: Streamed, body: bytes | None, head: Head,
                     writer: asyncio.StreamWriter, request_id: str,
                     what: str) -> tuple[bool, int, str]:
        """The worker's answer to the client: its head, then ``body`` or its chunks."""
        keep = head.keep_alive()
        length = str(len(body)) if body is not None else answer.headers.get("content-length")
        lines = [f"HTTP/1.1 {answer.status} {REASONS.get(answer.status, 'OK')}",
                 *(f"{name}: {answer.headers[name]}" for name in RELAYED
                   if name in answer.headers and name != "content-length"),
                 *([f"content-length: {length}"] if length is not None else []),
                 f"fly-request-id: {request_id}", f"x-request-id: {request_id}",
                 *([] if keep else ["connection: close"])]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        if body is None and head.method != b"HEAD" and answer.status != 304:
            try:
                async for chunk in answer.chunks:
                    writer.write(chunk)
                    await writer.drain()
            except NoAnswer as exc:  # the head is out: only a close tells the client
                log.info("%s stopped coming: %s", what, exc)
                return False, answer.status, ""
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        return keep, answer.status, ""


async def _framed(answer: Streamed) -> bytes | None:
    """The body read whole when the answer gives no length to frame it by (never a file's
    answer: an error's, say), else None: it streams."""
    if "content-length" in answer.headers or answer.status == 304:
        return None
    return b"".join([chunk async for chunk in answer.chunks])
