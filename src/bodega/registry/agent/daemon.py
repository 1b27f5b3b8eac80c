"""``RegistryAgent``: the one registry replica of a host (Corrosion's agent).

``bodega up`` and ``bodega join`` start one per host, before the host's
workers, broker and proxy, and supervise it like them. It is the only process
on the host that replicates: it gossips rows, pulls and serves anti-entropy and
applies every row of the cluster, once for the whole host. The host's other
processes (``hosted.py``) read its view (``registry.db`` in its data dir) and
hand it the rows they write, on its Unix socket (``local.sock``, in the same
private directory). It is the host's one SWIM member, of role ``agent``: the
member peers pull from (``meta["sync"]``). The host's processes check in with
it about once a second instead of each speaking SWIM; it gossips a record for
each (its *tenants*, ``membership/core/tenants.py``), judges them by their
silence, and answers each check-in with the members that changed since the
check-in before it (the first, with every member).

Listeners:

- the Unix socket: the local API (``/v1/local/hand``, ``/v1/local/rows-of``,
  ``/v1/local/sync``, ``/v1/local/changes``, ``/v1/local/check-in``,
  ``/v1/local/leave``), for the host's own processes only (the directory is
  0700);
- its internal listener (mutual TLS): registry sync and subscriptions for the
  cluster's members, health and metrics as every component has
  (``agent/listener.py``).

Its state is its view: a kill -9 loses at most the rows it had not committed,
which their writers still hold and hand again (``hosted.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bodega.model.errors import BadRequest, Unavailable
from bodega.registry.agent.link import (
    CHANGES_PATH,
    CHECK_IN_PATH,
    HAND_PATH,
    LEAVE_PATH,
    ROWS_OF_PATH,
    SOCKET_NAME,
    SYNC_PATH,
    ChangeMark,
    ChangesAsked,
    CheckIn,
    Leave,
    Presence,
)
from bodega.registry.agent.listener import agent_routes
from bodega.registry.agent.member_tls import certificate_meta, renewal
from bodega.registry.membership.core.messages import DecodeError, record_json
from bodega.registry.membership.core.outputs import Delivered, Event
from bodega.registry.node import RegistryConfig, RegistryNode
from bodega.registry.sync.core.rowwire import decode_reply, reply_json
from bodega.runtime.serve import Served, bind, serve
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.waits import within
from bodega.wire.transport.http import (
    handle_errors,
    json_response,
    not_found_app_handler,
    read_model,
)

log = logging.getLogger("bodega.registry.agent")

# A ``changes`` call held this long with nothing applied is answered anyway: the asker asks
# again (a connection held open forever would outlive a half-dead asker unnoticed).
WAIT_LIMIT = 20.0


class Hand(BaseModel):
    """Rows a process of this host wrote: a sync reply served from its own store."""
    model_config = ConfigDict(extra="forbid")
    origin: str = Field(min_length=1, max_length=200)
    floor: int = Field(ge=0, lt=2**62)
    reply: dict[str, object]


class RowsOf(BaseModel):
    model_config = ConfigDict(extra="forbid")
    origin: str = Field(min_length=1, max_length=200)


@dataclass(frozen=True)
class AgentConfig:
    registry: RegistryConfig  # its data_dir holds the view and the socket
    listen_host: str = "127.0.0.1"
    listen_port: int = 0

    @property
    def socket_path(self) -> Path:
        return self.registry.data_dir / SOCKET_NAME


class RegistryAgent:
    def __init__(self, config: AgentConfig, tls: InternalTls | None,
                 metrics: CollectorRegistry | None = None) -> None:
        self.config = config
        self.tls = tls
        self.metrics = metrics or CollectorRegistry()  # tls's refusals belong in it too
        self.node: RegistryNode | None = None
        self.internal: Served | None = None
        self.local: Served | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # What ``changes`` answers: this life of the agent, and how many batches of rows it
        # has applied in it. A new life is a new epoch, so no asker mistakes one count for
        # the other's.
        self._epoch = secrets.token_hex(8)
        self._generations: dict[str, int] = {}  # times rows were applied, by table
        self._applied = asyncio.Event()
        self._members_changed = asyncio.Event()
        self._started = self._stopping = False

    @property
    def url(self) -> str:
        assert self.internal is not None
        return self.internal.url

    async def start(self) -> None:
        c = self.config
        sock = bind(c.listen_host, c.listen_port)
        scheme = "https" if self.tls else "http"
        url = f"{scheme}://{c.listen_host}:{sock.getsockname()[1]}"
        self.node = RegistryNode(RegistryConfig(**{**c.registry.__dict__, "meta": {
            **c.registry.meta, "url": url, **certificate_meta(self.tls)}}),
            registry=self.metrics, tls=self.tls)
        internal = Starlette(routes=[*agent_routes(c.registry.name, c.registry.region,
                                                   self.metrics, self.tls),
                                     *self.node.routes()],
                             exception_handlers={404: not_found_app_handler,
                                                 405: not_found_app_handler})
        self.internal = await serve(internal, c.listen_host, 0, sock=sock, tls=self.tls)
        self.local = await serve(Starlette(routes=self.local_routes(),
                                           exception_handlers={404: not_found_app_handler,
                                                               405: not_found_app_handler}),
                                 "unix", 0, sock=_unix_socket(c.socket_path))
        self.node.table_listeners.append(self._bump)
        self.node.membership.add_listener(self._member_event)
        await self.node.start()
        self._started = True  # membership runs: check-ins are taken from now on
        if self.tls is not None:
            self._tasks.append(asyncio.create_task(renewal(self.tls, self.node).run()))
        log.info("registry agent %s: replica %s, peers sync from %s, this host's processes "
                 "on %s", c.registry.name, c.registry.view_path, url, c.socket_path)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._stopping = True  # the held ``changes`` calls are answered now, new ones refused
        self._bump(set())
        self._member_event(None)
        for served in (self.local, self.internal):
            if served is not None:
                await served.stop()
        if self.node is not None:
            await self.node.stop(leave=True)
        with contextlib.suppress(FileNotFoundError):
            self.config.socket_path.unlink()

    def local_routes(self) -> list[BaseRoute]:
        def route(path: str, call: object) -> Route:
            async def endpoint(request: Request) -> Response:
                return await handle_errors(request, call)  # type: ignore[arg-type]
            return Route(path, endpoint, methods=["POST"])
        return [route(HAND_PATH, self._hand), route(ROWS_OF_PATH, self._rows_of),
                route(SYNC_PATH, self._sync), route(CHANGES_PATH, self._changes),
                route(CHECK_IN_PATH, self._check_in), route(LEAVE_PATH, self._leave)]

    def _member_event(self, what: Event | Delivered | None) -> None:
        if not isinstance(what, Delivered):  # a member changed (or the agent stops)
            changed, self._members_changed = self._members_changed, asyncio.Event()
            changed.set()

    def _members_mark(self) -> str:
        assert self.node is not None
        swim = self.node.membership.swim
        return f"{self._epoch}.{swim.table_version}.{swim.generation}.{swim.incarnation}"

    def _held_version(self, mark: str) -> int | None:
        """The table's version a check-in's ``mark`` says the process holds, if it is one
        of this life's (its answer then carries only what changed since); None: it holds
        nothing of ours, and is answered with every member."""
        epoch, _, rest = mark.partition(".")
        version = rest.partition(".")[0]
        if epoch != self._epoch or not (version.isascii() and version.isdigit()):
            return None
        assert self.node is not None
        held = int(version)
        return held if held <= self.node.membership.swim.table_version else None

    async def _check_in(self, request: Request) -> Response:
        """A process of this host is alive: the agent gossips its record (``Swim.host``).
        Held, like ``changes``, until the members change or ``hold`` passes."""
        assert self.node is not None
        asked = await read_model(request, CheckIn)
        if self._stopping or not self._started:
            raise Unavailable("the registry agent is starting or stopping: check in again")
        membership = self.node.membership
        try:
            membership.host(asked.name, asked.role, asked.region, asked.meta, asked.generation)
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + asked.hold
        while (self._members_mark() == asked.mark and not self._stopping
               and loop.time() < deadline):
            with contextlib.suppress(TimeoutError):
                await within(self._members_changed.wait(), deadline - loop.time())
        swim, mark, now = membership.swim, self._members_mark(), loop.time()
        you = swim.record_of(asked.name)
        assert you is not None  # recorded above, and a tenant's record is never reaped live
        held = self._held_version(asked.mark)
        members = None if mark == asked.mark else (
            swim.records() if held is None else swim.changed_since(held))
        return json_response(Presence(
            epoch=self._epoch, mark=mark, you=record_json(you),
            members=None if members is None else [record_json(r) for r in members],
            suspicions={name: round(ends - now, 3)
                        for name, ends in swim.suspicion_deadlines().items()},
        ).model_dump())

    async def _leave(self, request: Request) -> Response:
        assert self.node is not None
        asked = await read_model(request, Leave)
        self.node.membership.tenant_left(asked.name)
        return json_response({})

    def _bump(self, tables: set[str]) -> None:
        """Rows were applied to ``tables`` (and committed): wake every ``changes`` call held
        to look whether it is about them."""
        for table in tables:
            self._generations[table] = self._generations.get(table, 0) + 1
        applied, self._applied = self._applied, asyncio.Event()
        applied.set()

    def _generation_of(self, tables: list[str] | None) -> int:
        """How many times rows were applied to ``tables`` (None: to any) in this life."""
        asked = self._generations if tables is None else tables
        return sum(self._generations.get(table, 0) for table in asked)

    async def _changes(self, request: Request) -> Response:
        """A long poll: answered once the tables asked about changed since the asker's mark
        (at once if they already have, or the mark is of another life), else after
        ``WAIT_LIMIT``. The host's processes follow the view with it instead of each looking
        at the file many times a second; a worker that follows only the gossip keys is not
        woken by every machine row another worker writes."""
        asked = await read_model(request, ChangesAsked)
        if self._stopping:  # the asker waits a moment and asks the agent's next life
            raise Unavailable("the registry agent is stopping")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_LIMIT
        while (asked.mark.epoch == self._epoch and not self._stopping
               and asked.mark.generation == self._generation_of(asked.tables)
               and loop.time() < deadline):
            with contextlib.suppress(TimeoutError):
                await within(self._applied.wait(), deadline - loop.time())
        mark = ChangeMark(epoch=self._epoch, generation=self._generation_of(asked.tables))
        return json_response(mark.model_dump())

    async def _hand(self, request: Request) -> Response:
        assert self.node is not None
        hand = await read_model(request, Hand)
        try:
            reply = decode_reply(hand.reply)
            known = self.node.accept(hand.origin, reply, hand.floor)
        except (DecodeError, ValueError) as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        return json_response({"known": known.to_json()})

    async def _rows_of(self, request: Request) -> Response:
        assert self.node is not None
        asked = await read_model(request, RowsOf)
        if not self.node.settled:
            # Its view is new (the host was wiped, say) and has not heard from a peer: what
            # it holds of the process's earlier life may be nothing, though peers hold it.
            raise Unavailable(f"the registry agent has not synced with the cluster yet: it "
                              f"cannot say what {asked.origin} wrote before; ask again")
        body = json.dumps({"reply": reply_json(self.node.rows_of(asked.origin))},
                          separators=(",", ":"))
        return Response(body, media_type="application/json")

    async def _sync(self, request: Request) -> Response:
        assert self.node is not None
        return json_response({"pulled": await self.node.sync_round()})


def _unix_socket(path: Path) -> socket.socket:
    """The local API's socket, replacing one a killed agent left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(512)
    sock.setblocking(False)
    return sock

