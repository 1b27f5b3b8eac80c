"""A request given up on is reset, TLS or not: its peer never gets it later.

The client's close of a connection it gave up on must discard what the kernel
still holds, or a peer cut off meanwhile would get the request after the heal
and act on it (``tests/cluster/test_late_requests.py`` shows that across
hosts). In TLS, a plain close would be a shutdown that waits for the peer; the
client aborts instead. Here the peer sees how the connection ended: a reset,
not a TLS close.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from bodega.model.errors import Indeterminate
from bodega.runtime.tls.contexts import server_context
from bodega.runtime.tls.files import TlsDir
from bodega.wire.internal.worker_client import WorkerClient
from tests.tls_kit import TEST_CA


@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plain"])
async def test_a_request_given_up_on_is_reset_not_closed(tmp_path: Path, secure: bool) -> None:
    ended: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")  # the request: never answered
            await reader.read()  # until the client ends the connection
            outcome: BaseException | None = None
        except (ConnectionResetError, ssl.SSLError, asyncio.IncompleteReadError) as exc:
            outcome = exc
        if not ended.done():
            ended.set_result(outcome)
        writer.close()

    context = None
    if secure:
        directory = TlsDir(TEST_CA.issue(tmp_path / "tls", "worker", "silent"))
        context = server_context(TEST_CA.ca_pem)
        context.load_cert_chain(directory.identity_path)
    server = await asyncio.start_server(silent, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if secure else "http"
    client = WorkerClient(f"{scheme}://127.0.0.1:{port}", TEST_CA.context() if secure else None,
                          timeout=0.5)
    try:
        with pytest.raises(Indeterminate):
            await client.stop("m1")
        how = await asyncio.wait_for(ended, 5)  # a graceful TLS shutdown would wait 30 s
        assert isinstance(how, ConnectionResetError), repr(how)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
