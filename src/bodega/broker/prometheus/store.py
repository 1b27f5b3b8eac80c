"""The host's metrics store, as the broker reaches it: its address and password from its
``endpoint.json`` (read again at each query: a store restarted has another of each), a
query forwarded to it with the org's filter, and its answer handed back as it is
(Prometheus' shape: ``{"status", "data"}``, or ``{"status": "error", "error", ...}``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bodega.model.errors import Unavailable
from bodega.wire.internal.metrics_store import read_endpoint

log = logging.getLogger("bodega.broker.prometheus")

QUERY_TIMEOUT = 30.0


@dataclass(frozen=True)
class StoreAnswer:
    status: int
    body: bytes
    content_type: str


class MetricsStore:
    """The host's store (``data_dir``: where it writes ``endpoint.json``)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=QUERY_TIMEOUT))
        return self._session

    async def ask(self, path: str, params: list[tuple[str, str]]) -> StoreAnswer:
        """POST ``params`` (a form) to ``path`` on the store; 503 when none answers here."""
        endpoint = read_endpoint(self.data_dir)
        if endpoint is None:
            raise Unavailable("no metrics store runs on this broker's host (victoria-metrics "
                              "not installed, not a server host, or still starting)")
        try:
            async with self._client().post(
                    f"{endpoint.url}{path}", data=params,
                    auth=aiohttp.BasicAuth(endpoint.username, endpoint.password)) as reply:
                body = await reply.read()
                return StoreAnswer(reply.status, body,
                                   reply.headers.get("Content-Type", "application/json"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("the metrics store at %s did not answer: %s", endpoint.url, exc)
            raise Unavailable(f"the metrics store did not answer: {exc}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
