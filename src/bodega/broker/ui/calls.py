"""The public API, called with the visitor's own token: every action the dashboard offers.

A button on a page does nothing a client could not: the broker sends the
same request to its own public listener that ``bodega machine stop`` sends,
with the visitor's token in ``Authorization``, so authentication, leases,
errors and metrics are the API's own. What needs a worker's answer (a
machine with its events, its placement record, its log) is read the same way,
through the typed client every other client uses (``wire/public/machines_client.py``),
so the screens read its models.
"""

from __future__ import annotations

import aiohttp

from bodega.wire.public.machines_client import MachinesClient
from bodega.wire.transport.aiohttp_transport import session


def own_url(host: str, port: int) -> str:
    """Where the broker reaches its own listener (a wildcard address is reached on loopback)."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class VisitorClients:
    """A ``MachinesClient`` for each visitor's token, all over one pooled session."""

    def __init__(self, base_url: str, timeout: float = 70.0) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def of(self, token: str) -> MachinesClient:
        if self._session is None:
            self._session = session(16)
        return MachinesClient(self.base_url, token, client=self._session, timeout=self.timeout)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
