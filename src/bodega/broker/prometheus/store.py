"""The metrics store a query goes to: this host's, else another server host's.

This host's store is read from its ``endpoint.json`` (again at each query: a store
restarted has another address and password), the query POSTed to it as a form with
the org's filter already added, and its answer handed back as it is (Prometheus'
shape: ``{"status", "data"}``, or ``{"status": "error", "error", ...}``). When this
host runs no store, or its store does not answer, the query goes to another broker
whose host runs one (``core/peers.py``), over its internal listener (mutual TLS,
``POST /v1/metrics/query``, brokers only), which asks its own store and never
another: every store scrapes the whole cluster, so losing a server host loses no
query.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from pydantic import BaseModel, ConfigDict

from bodega.model.errors import Unavailable
from bodega.wire.internal.metrics_store import read_endpoint

log = logging.getLogger("bodega.broker.prometheus")

QUERY_TIMEOUT = 30.0
CONNECT_TIMEOUT = 3.0  # a host that does not answer a connection: the next store, soon
PEER_QUERY_PATH = "/v1/metrics/query"  # on a broker's internal listener


class PeerQuery(BaseModel):
    """A query one broker hands another: the store's path and the parameters, filter
    included."""

    model_config = ConfigDict(extra="forbid")

    path: str
    params: list[tuple[str, str]]


@dataclass(frozen=True)
class StoreAnswer:
    status: int
    body: bytes
    content_type: str


class MetricsStore:
    """``data_dir``: where this host's store writes ``endpoint.json`` (None: no store
    here); ``peers``: the internal URLs of other brokers with a store, asked in turn;
    ``client_ssl``: this broker's TLS client context (its current certificate), to ask
    them (None: plain links)."""

    def __init__(self, data_dir: Path | None, peers: Callable[[], list[str]] = list,
                 client_ssl: Callable[[], ssl.SSLContext | None] = lambda: None) -> None:
        self.data_dir = data_dir
        self.peers = peers
        self.client_ssl = client_ssl
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=QUERY_TIMEOUT, sock_connect=CONNECT_TIMEOUT))
        return self._session

    async def ask(self, path: str, params: list[tuple[str, str]]) -> StoreAnswer:
        """The answer of this host's store, else of the first other one that answers;
        503 when none does."""
        why = "this host runs no metrics store"
        if self.data_dir is not None:
            try:
                return await self.ask_here(path, params)
            except Unavailable as exc:
                why = exc.message
        for url in self.peers():
            try:
                async with self._client().post(
                        f"{url}{PEER_QUERY_PATH}", ssl=self.client_ssl() or True,
                        data=PeerQuery(path=path, params=params).model_dump_json(),
                        headers={"Content-Type": "application/json"}) as reply:
                    if reply.status == 503:
                        continue  # its store is down too: the next
                    return StoreAnswer(reply.status, await reply.read(),
                                       reply.headers.get("Content-Type", "application/json"))
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("broker at %s did not answer a metrics query: %s", url, exc)
        raise Unavailable(f"no metrics store answers ({why}; no other server host's "
                          "either)")

    async def ask_here(self, path: str, params: list[tuple[str, str]]) -> StoreAnswer:
        """POST ``params`` (a form) to ``path`` on this host's store; 503 when it does not
        answer."""
        endpoint = read_endpoint(self.data_dir) if self.data_dir is not None else None
        if endpoint is None:
            raise Unavailable("this host's metrics store is not running (victoria-metrics "
                              "not installed, or still starting)")
        try:
            async with self._client().post(
                    f"{endpoint.url}{path}", data=params,
                    auth=aiohttp.BasicAuth(endpoint.username, endpoint.password)) as reply:
                body = await reply.read()
                return StoreAnswer(reply.status, body,
                                   reply.headers.get("Content-Type", "application/json"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("the metrics store at %s did not answer: %s", endpoint.url, exc)
            raise Unavailable(f"this host's metrics store did not answer: {exc}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
