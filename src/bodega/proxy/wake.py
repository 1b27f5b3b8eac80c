"""Starting stopped machines for requests that need them, one start per app at a time.

A request for an app with nothing running waits here while the proxy asks
the machine's worker to start it and then connects to its service port
until it accepts. The connection that was accepted is kept in the request
path's pool, so the first request goes out on it rather than on a second
handshake. Concurrent requests for the same sleeping app share that one
start: fifty requests to a sleeping app start exactly one machine, and all
fifty are answered by it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from bodega.model.errors import BodegaError
from bodega.proxy.core.balance import wake_candidate
from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import Backend, RoutingTable
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.upstream import UPSTREAM_BUFFER, Conn, Upstreams
from bodega.wire.internal.worker_client import WorkerClient

log = logging.getLogger("bodega.proxy.wake")

READY_TIMEOUT = 30.0
PROBE_INTERVAL = 0.001  # a refused connect on loopback costs microseconds
PROBE_CAP = 0.005
# A request for an app with nothing asleep in the view asks the workers this long, every
# REFRESH_INTERVAL, for a machine to start (one stopping, or stopped but not yet heard of).
STOPPING_WAIT = 10.0
REFRESH_INTERVAL = 0.1
# A started machine that refused a request's connect is waited for this long to accept: its
# program may still be binding its port.
BINDING_WAIT = 5.0


class Waker:
    def __init__(self, table: RoutingTable, clients: Callable[[str], WorkerClient | None],
                 load: Load, metrics: ProxyMetrics, region: str,
                 ready_timeout: float = READY_TIMEOUT) -> None:
        self.table = table
        self.clients = clients
        self.load = load
        self.metrics = metrics
        self.region = region
        self.ready_timeout = ready_timeout
        self._waking: dict[str, asyncio.Task[Backend | None]] = {}

    def wake(self, app: str, pool: Upstreams | None = None) -> asyncio.Task[Backend | None]:
        """Start one stopped machine of ``app`` (or join the start under way); ``pool``:
        where the connection that found its port accepting is kept for a request."""
        task = self._waking.get(app)
        if task is None or task.done():
            task = asyncio.create_task(self._wake(app, pool))
            self._waking[app] = task
        return task

    async def _wake(self, app: str, pool: Upstreams | None) -> Backend | None:
        backend = wake_candidate(self.table.backends(app), self.region, self.table.worker_alive)
        deadline = time.monotonic() + STOPPING_WAIT
        while backend is None and time.monotonic() < deadline and self.table.backends(app):
            # None asleep in the view, and none serving (or the request would not be here):
            # the view may lag a stop by a gossip round, or a machine is still stopping.
            # Ask their workers, until one can be started.
            await asyncio.gather(*(self.refresh(b) for b in self.table.backends(app)))
            backend = wake_candidate(self.table.backends(app), self.region,
                                     self.table.worker_alive)
            if backend is None:
                await asyncio.sleep(REFRESH_INTERVAL)
        if backend is None:
            return None
        return await self.start(backend, pool)

    async def start(self, backend: Backend, pool: Upstreams | None = None) -> Backend | None:
        """Ask the worker to start ``backend``, then wait until its port accepts (the
        accepted connection kept in ``pool``, or closed)."""
        began = time.perf_counter()
        client = self.clients(backend.worker)
        if client is None:
            log.warning("%s: no address for worker %s", backend.machine_id, backend.worker)
            return None
        try:
            await client.start(backend.machine_id)
            answered = time.perf_counter() - began
        except BodegaError as exc:
            log.warning("%s (%s): could not start it: %s", backend.machine_id, backend.app,
                        exc.message)
            self.metrics.autostarts.labels(backend.app, "failed").inc()
            return None
        if not await until_accepts(backend.address, self.ready_timeout, pool):
            log.warning("%s (%s): started, but %s:%d did not accept in %.0fs",
                        backend.machine_id, backend.app, *backend.address, self.ready_timeout)
            self.metrics.autostarts.labels(backend.app, "not_ready").inc()
            return None
        seconds = time.perf_counter() - began
        self.metrics.autostarts.labels(backend.app, "started").inc()
        self.metrics.autostart_seconds.observe(seconds)
        log.info("%s (%s): started for a request in %.1f ms (its worker's start answered in "
                 "%.1f ms)", backend.machine_id, backend.app, seconds * 1000, answered * 1000)
        self.load.woke(backend.machine_id)
        # A machine serving only TCP services is not in the HTTP table: it is still started.
        return self.table.mark_started(backend.machine_id) or replace(backend, state="started")

    async def refresh(self, backend: Backend) -> None:
        """Ask the machine's worker how it is (the view may lag a stop by a gossip round)."""
        client = self.clients(backend.worker)
        if client is None:
            return
        try:
            machine = await client.machine(backend.machine_id)
        except BodegaError:
            return
        self.table.put_machine(backend.machine_id, machine)

    async def bound(self, backend: Backend, pool: Upstreams) -> bool:
        """Whether ``backend``, started but refusing connections, accepts within BINDING_WAIT
        (its program was still binding its port); the accepted connection goes to ``pool``.
        A request waits on it meanwhile, so it counts as busy: autostop leaves it be."""
        self.load.begin(backend.machine_id)
        try:
            return await until_accepts(backend.address, BINDING_WAIT, pool)
        finally:
            self.load.end(backend.machine_id)

    async def start_all(self, backends: Iterable[Backend]) -> list[Backend]:
        results = await asyncio.gather(*(self.start(b) for b in backends))
        return [b for b in results if b is not None]


def probe_delay(waited: float) -> float:
    """How long to wait before the next connect to a starting machine, ``waited`` seconds
    into its start: every millisecond at first, then a fiftieth of the wait so far (at
    most PROBE_CAP). A slow start on a loaded host is noticed at most 2 % late, and its
    probe takes far fewer of the cores the program is starting on."""
    return min(max(PROBE_INTERVAL, waited / 50), PROBE_CAP)


async def until_accepts(address: tuple[str, int], timeout: float,
                        pool: Upstreams | None = None) -> bool:
    """Connect until the service accepts (a started process may still be binding); the
    connection it accepted goes to ``pool`` (None: closed)."""
    began = time.monotonic()
    deadline = began + timeout
    while time.monotonic() < deadline:
        sock = await _connected(address)
        if sock is None:
            await asyncio.sleep(probe_delay(time.monotonic() - began))
            continue
        reader, writer = await asyncio.open_connection(sock=sock, limit=UPSTREAM_BUFFER)
        if pool is None:
            writer.close()
        else:
            pool.release(Conn(address, reader, writer))
        return True
    return False


async def _connected(address: tuple[str, int]) -> socket.socket | None:
    """One connect attempt on a bare socket (a refused one costs no transport, no task)."""
    sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET,
                         socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        async with asyncio.timeout(1.0):
            await asyncio.get_running_loop().sock_connect(sock, address)
    except (OSError, TimeoutError):
        sock.close()
        return None
    return sock
