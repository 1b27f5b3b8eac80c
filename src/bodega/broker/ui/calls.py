"""The public API, called with the visitor's own token: every action the dashboard offers.

A button on a page does nothing a client could not: the broker sends the
same request to its own public listener that ``bodega machine stop`` sends,
with the visitor's token in ``Authorization``, so authentication, leases,
errors and metrics are the API's own. What needs a worker's answer (a
machine with its events, its placement record, its log) is read the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from pydantic import ValidationError

from bodega.model.errors import NotFound
from bodega.wire.aiohttp_transport import session
from bodega.wire.fly import PlacementsRequest
from bodega.wire.json_client import JsonClient
from bodega.wire.logs import LogLine

LOG_CONNECT_TIMEOUT = 10.0


def own_url(host: str, port: int) -> str:
    """Where the broker reaches its own listener (a wildcard address is reached on loopback)."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class OwnApi:
    def __init__(self, base_url: str, timeout: float = 70.0) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _client(self, token: str) -> JsonClient:
        if self._session is None:
            self._session = session(16)
        return JsonClient(self.base_url, token, client=self._session, timeout=self.timeout,
                          what="the broker's API")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def machine(self, token: str, app: str, machine_id: str) -> Any:
        return await self._client(token).request("GET", f"/v1/apps/{app}/machines/{machine_id}")

    async def placement(self, token: str, app: str, machine_id: str) -> Any:
        """The machine's placement record; None for a machine that has none."""
        try:
            return await self._client(token).request(
                "GET", f"/v1/apps/{app}/machines/{machine_id}/placement")
        except NotFound:
            return None

    async def action(self, token: str, app: str, machine_id: str, action: str) -> Any:
        return await self._client(token).request(
            "POST", f"/v1/apps/{app}/machines/{machine_id}/{action}", json={})

    async def placements(self, token: str, body: PlacementsRequest) -> Any:
        return await self._client(token).request(
            "POST", "/v1/platform/placements", json=body.model_dump(mode="json", exclude_none=True))

    async def follow_logs(self, token: str, app: str, machine_id: str,
                          limit: int) -> AsyncIterator[LogLine]:
        """The machine's last ``limit`` lines, then each new one as it is written."""
        client = self._client(token)
        params = {"machine": machine_id, "follow": "true", "limit": str(limit)}
        async with client.http.get(
                f"{self.base_url}/v1/apps/{app}/logs", params=params, headers=client.headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=LOG_CONNECT_TIMEOUT)
        ) as answer:
            if answer.status != 200:
                return
            async for raw in answer.content:
                with contextlib.suppress(ValidationError, ValueError):
                    if raw.strip():
                        yield LogLine.model_validate_json(raw)
