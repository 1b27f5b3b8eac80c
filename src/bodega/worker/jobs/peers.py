"""Other workers, as the jobs part of a worker reaches them: by name, through the view.

A home places probes on runners and tells them to stop tasks; a runner asks
homes for tasks, renews leases and reports ends. Both find a worker's URL and
whether it is alive in the registry view the worker embeds (given here as
functions, so this module reads no registry itself), and call it with a
``JobClient``: the same transport and credentials as every internal call. A call
to the worker itself is made in its own process (``own_calls.py``).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Protocol

import aiohttp

from bodega.jobs.binding import WorkerRoom
from bodega.model.errors import Unavailable
from bodega.wire.internal.jobs.calls import (
    HomeClaim,
    HomeClaimAnswer,
    HomeReleases,
    HomeReleasesAnswer,
    HomeRenew,
    HomeRenewAnswer,
    ProbeBatch,
    ProbeBody,
    Probed,
    ProbesHeld,
    RunStop,
)
from bodega.wire.internal.jobs.worker_client import JobClient
from bodega.wire.public.jobs.api import JobStatus, Ok
from bodega.wire.transport.aiohttp_transport import session

TIMEOUT = 10.0


class JobCalls(Protocol):
    """The calls workers make to each other for jobs: a ``JobClient`` to another worker,
    ``OwnCalls`` to itself."""

    async def find_job(self, app: str, name: str, tasks: bool = False) -> JobStatus: ...
    async def claim_task(self, job_id: str, body: HomeClaim) -> HomeClaimAnswer: ...
    async def renew_leases(self, body: HomeRenew) -> HomeRenewAnswer: ...
    async def release_tasks(self, body: HomeReleases) -> HomeReleasesAnswer: ...
    async def probe(self, body: ProbeBody) -> Probed: ...
    async def probe_batch(self, body: ProbeBatch) -> ProbesHeld: ...
    async def drop_probes(self, job_id: str) -> Ok: ...
    async def stop_run(self, body: RunStop) -> Ok: ...


class JobPeers:
    def __init__(self, name: str, tls: ssl.SSLContext | None,
                 url_of: Callable[[str], str | None],
                 alive: Callable[[str], bool], rooms: Callable[[], list[WorkerRoom]]) -> None:
        """``tls``: this worker's client context (its certificate says who calls)."""
        self.name = name
        self.tls = tls
        self.url_of = url_of
        self.alive = alive
        self.rooms = rooms
        self._session: aiohttp.ClientSession | None = None
        self._clients: dict[str, JobClient] = {}
        self.own: JobCalls | None = None  # the worker's own calls, once its home and runner are

    def client(self, worker: str) -> JobCalls:
        if worker == self.name and self.own is not None:
            return self.own
        url = self.url_of(worker)
        if url is None:
            raise Unavailable(f"worker {worker} is not in this worker's view",
                              status="unreachable")
        found = self._clients.get(url)
        if found is None:
            if self._session is None:
                self._session = session(ssl=self.tls)
            found = JobClient(url, client=self._session, timeout=TIMEOUT)
            self._clients[url] = found
        return found

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
