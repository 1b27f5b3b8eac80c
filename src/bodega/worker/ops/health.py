"""Health checks, the shell: probe each started machine's checks, report through the core.

After commits, at most every ``RECONCILE`` seconds, the worker's started
machines with checks are compared with the probers running: a run
(machine, start_seq) with checks gets one task, and a task whose run is
over (stopped, restarted, updated, destroyed) is cancelled. A task probes
its checks when due (``core.checks``: after the grace period, then every
interval), each probe bounded by its timeout and closing its connection
whatever happens, and hands every result to ``MachineService.check_result``:
the core decides, and only a change of status is written (a machine event,
and so a republished registry row).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from bodega.model.errors import BodegaError
from bodega.model.machine import rfc3339
from bodega.worker.core import checks as core
from bodega.worker.core.decisions import CheckResult
from bodega.worker.core.records import MachineRow
from bodega.worker.metrics import WorkerMetrics
from bodega.worker.ops.machines import MachineService
from bodega.worker.store import queries
from bodega.worker.store.database import Store

log = logging.getLogger("bodega.worker.health")

RECONCILE = 0.25  # how soon a new run's probes start and an ended run's stop
MAX_HEAD = 8192  # read at most this much of an answer: only the status line matters


async def probe(spec: core.CheckSpec, host: str) -> tuple[str, str]:
    """(status, output) of one probe; never raises, never leaves a connection open."""
    try:
        async with asyncio.timeout(spec.timeout):
            if spec.type == "http":
                return await _http(spec, host)
            _, writer = await asyncio.open_connection(host, spec.port)
            await _close(writer)
            return core.PASSING, f"TCP connect {host}:{spec.port}: success"
    except TimeoutError:
        return core.CRITICAL, f"timed out after {spec.timeout:g}s"
    except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
        return core.CRITICAL, core.clip_output(f"{type(exc).__name__}: {exc}")


async def _address(host: str, port: int) -> tuple[int, int, int, Any]:
    family, kind, proto, _, address = (await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM))[0]
    return family, kind, proto, address


async def _connect(host: str, port: int) -> socket.socket:
    """A connected TCP socket whose handshake's last ACK waits (up to 200 ms) for the first
    bytes sent: an HTTPS probe's, whose first bytes its TLS layer writes."""
    loop = asyncio.get_running_loop()
    family, kind, proto, address = await _address(host, port)
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, 1)
        await loop.sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock


async def _connect_sending(host: str, port: int, request: bytes,
                           timeout: float) -> socket.socket:
    """A TCP connection to ``host:port`` whose handshake's last ACK carries ``request``.

    The server's kernel then queues the connection for ``accept`` with the request
    already in it, and a server that reads once as soon as it accepts, without waiting,
    always finds it. One in the sandbox does: gVisor's host network (this runsc) ends a
    blocking read() of a connection just accepted at once when nothing has arrived, and
    busybox httpd, which reads without polling first, closed such a connection
    unanswered, about one in thirty on a busy host, while it served (docs/isolation.md).

    The request is handed to the kernel by a blocking send started right after the
    connect, in a thread of its own: Linux holds the handshake's last ACK for a send
    waiting on the connection, and, with ``TCP_DEFER_ACCEPT`` on the connecting socket,
    for 200 ms at most when the answer to the SYN is in before the send starts (on
    loopback, within the connect call). Sent from the event loop, a stall of the loop
    longer than that between the connect and the write (another task's work, a loaded
    host) let the bare ACK go, and the server read nothing."""
    loop = asyncio.get_running_loop()
    family, kind, proto, address = await _address(host, port)
    connected: asyncio.Future[socket.socket] = loop.create_future()

    def settle(sock: socket.socket | None, error: BaseException | None) -> None:
        if connected.cancelled():  # the probe timed out meanwhile
            if sock is not None:
                sock.close()
        elif sock is not None:
            connected.set_result(sock)
        else:
            connected.set_exception(error or OSError("no connection"))

    def connect() -> None:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, 1)
            # The send gives up with the probe: a host that never answers the SYN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack(
                "ll", int(timeout), int(timeout % 1 * 1_000_000)))
            sock.setblocking(False)
            started = sock.connect_ex(address)
            if started not in (0, errno.EINPROGRESS):
                raise OSError(started, os.strerror(started))
            sock.setblocking(True)
            try:
                sock.sendall(request)
            except BlockingIOError:  # SO_SNDTIMEO: no handshake within the timeout
                raise TimeoutError(f"no connection in {timeout:g}s") from None
        except BaseException as exc:
            sock.close()
            outcome: tuple[socket.socket | None, BaseException | None] = (None, exc)
        else:
            outcome = (sock, None)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: no one waits
            if outcome[0] is not None:
                outcome[0].close()

    threading.Thread(target=connect, name="bodega-check-connect", daemon=True).start()
    return await connected


async def _http(spec: core.CheckSpec, host: str) -> tuple[str, str]:
    headers = "".join(f"{name}: {value}\r\n" for name, value in spec.headers)
    request = (f"{spec.method} {spec.path} HTTP/1.1\r\nHost: {host}:{spec.port}\r\n"
               f"User-Agent: bodega-check\r\n{headers}Connection: close\r\n\r\n").encode()
    if spec.protocol == "https":
        context = ssl.create_default_context()
        if spec.tls_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        sock = await _connect(host, spec.port)
    else:
        context = None
        sock = await _connect_sending(host, spec.port, request, spec.timeout)
    try:
        reader, writer = await asyncio.open_connection(
            sock=sock, ssl=context, server_hostname=host if context else None, limit=MAX_HEAD)
    except BaseException:
        sock.close()
        raise
    try:
        try:
            if context is not None:  # through TLS: the request goes once it is up
                writer.write(request)
                await writer.drain()
            # The whole status line, however the server splits it over its writes.
            head = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return core.CRITICAL, ("the connection was closed inside the status line"
                                   if exc.partial else "the connection was closed with no answer")
        except asyncio.LimitOverrunError:
            return core.CRITICAL, f"no status line in the answer's first {MAX_HEAD} bytes"
    finally:
        await _close(writer)
    parts = head.decode("latin-1", "replace").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return core.CRITICAL, core.clip_output(f"not an HTTP answer: {head[:60]!r}")
    code = int(parts[1])
    line = core.clip_output(f"{spec.method} {spec.path}: {' '.join(parts[1:])}")
    return (core.PASSING if 200 <= code < 300 else core.CRITICAL), line


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
        async with asyncio.timeout(1.0):
            await writer.wait_closed()


class HealthChecks:
    def __init__(self, store: Store, machines: MachineService, metrics: WorkerMetrics,
                 service_host: Callable[[MachineRow], str | None]) -> None:
        self.store = store
        self.machines = machines
        self.metrics = metrics
        self.service_host = service_host
        self.tasks: dict[tuple[str, int], asyncio.Task[Any]] = {}

    async def run(self) -> None:
        # Reconcile after commits only, at most every RECONCILE seconds: an idle worker (or
        # one of a thousand in a process) reads nothing, and a busy one reads once per burst.
        changed = asyncio.Event()
        self.store.on_commit(lambda _resource: changed.set())
        try:
            while True:
                changed.clear()
                try:
                    self.reconcile()
                except Exception:
                    log.exception("reconciling health checks failed")
                await asyncio.sleep(RECONCILE)
                await changed.wait()
        finally:
            await self.close()

    def reconcile(self) -> None:
        wanted: dict[tuple[str, int], MachineRow] = {}
        for row in queries.started_with_checks(self.store.db):
            if core.specs(row.config):
                wanted[(row.id, row.start_seq)] = row
        for key in [k for k in self.tasks if k not in wanted]:
            self.tasks.pop(key).cancel()
        for key, row in wanted.items():
            if key not in self.tasks:
                self.tasks[key] = asyncio.create_task(self._prober(row))

    async def close(self) -> None:
        tasks = list(self.tasks.values())
        self.tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _prober(self, row: MachineRow) -> None:
        specs = core.specs(row.config)
        host = self.service_host(row) or row.private_ip or "127.0.0.1"
        started = time.monotonic()
        due = {spec.name: core.first_due(spec, started) for spec in specs}
        while True:
            now = time.monotonic()
            ready = [s for s in specs if due[s.name] <= now]
            if not ready:
                await asyncio.sleep(max(0.0, min(due.values()) - now))
                continue
            # Due checks run side by side: one slow probe never delays another.
            results = await asyncio.gather(*(self._probe_once(s, host) for s in ready))
            ended = time.monotonic()
            for spec, (status, output) in zip(ready, results, strict=True):
                due[spec.name] = core.next_due(spec, ended)
                await self._report(row, spec, status, output)

    async def _probe_once(self, spec: core.CheckSpec, host: str) -> tuple[str, str]:
        begun = time.monotonic()
        status, output = await probe(spec, host)
        self.metrics.check_seconds.labels(spec.type).observe(time.monotonic() - begun)
        self.metrics.check_runs.labels(spec.type, status).inc()
        return status, output

    async def _report(self, row: MachineRow, spec: core.CheckSpec, status: str,
                      output: str) -> None:
        result = CheckResult(spec.name, status, output, rfc3339(self.store.clock()),
                             row.start_seq)
        try:
            if await self.machines.check_result(row.id, result):
                self.metrics.check_changes.labels(status).inc()
                log.info("%s: check %s is %s (%s)", row.id, spec.name, status, output)
        except (BodegaError, TimeoutError):
            pass  # busy in an operation or gone: the next probe reports again
