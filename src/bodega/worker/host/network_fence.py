"""Networks kept apart over IPv4: one worker's fence, written from what it knows.

Every machine of a worker as root hangs on the worker's bridge by a port (its
host-side veth) and has an IPv4 address of the worker's /24; the host routes
between workers' /24s (and, where the operator routes them, between hosts). Without
a fence any machine reaches any other, whatever its app. This keeps the worker's
tables of ``networking/core/rules.py`` (``fence4_ruleset``): a machine of this worker is
reached over IPv4 only by machines of its own network (its app's ``<org>/<network>``,
from the registry view's apps rows), on its bridge or routed into it; with the
private network, by none (machines meet over 6PN, behind that network's fence).

- **Fails closed.** A port no machine holds (one wired ahead) meets no one, and a
  machine whose app row has not reached this worker yet counts as a network of its
  own app alone until the row arrives.
- **Follows the view.** Machines, apps and workers rows come through subscriptions;
  a change marks the fence stale and it is written again shortly after (changes that
  arrive together are written once). An attach writes it at once: a machine meets
  its network's machines from its first start.
- **Written whole.** Each write replaces the tables in one transaction, so no half
  state survives a crash; at start they are rebuilt from the machines in the store.
- **Machines that stay keep it.** A worker stopped with its machines left running
  (or killed) leaves the tables, so they stay fenced until the next start takes
  them over; one that stops its machines removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Iterable
from typing import Any, Protocol

from bodega.model.answer import from_doc
from bodega.model.rows import AppRow, WorkerRow
from bodega.networking import nftables
from bodega.networking.commands import CommandFailed
from bodega.networking.core.directory import app_network
from bodega.networking.core.rules import Fence4, fence4_ruleset, removal
from bodega.registry.api.subscriptions import RowChange
from bodega.registry.membership.feed import FeedLagged
from bodega.worker.core.records import MachineRow
from bodega.worker.host.netns import NetnsNetwork

log = logging.getLogger("bodega.worker.fence")

SETTLE = 0.1  # seconds a change waits for the ones arriving with it before a write


class Feed(Protocol):
    def __enter__(self) -> Feed: ...

    def __exit__(self, *exc: object) -> None: ...

    def __aiter__(self) -> Feed: ...

    async def __anext__(self) -> RowChange: ...


class View(Protocol):
    def subscribe(self, table: str, **filters: str | int) -> Any: ...


class NetworkFence:
    def __init__(self, network: NetnsNetwork, table: str, *, private: bool,
                 other_table: str | None = None) -> None:
        self.network = network
        self.fence = Fence4(table, network.bridge,
                            network.names.veth_prefix(network.subnet) + "*", private)
        self.other_table = other_table  # the private network's, left by an earlier run
        self.apps: dict[int, str] = {}  # this worker's address index -> its machine's app
        self.networks: dict[str, str] = {}  # app -> network key, from apps rows
        self.machines: dict[str, tuple[str, str]] = {}  # id -> (IPv4 address, app), any worker
        self.subnets: dict[str, str] = {}  # worker -> its machine subnet
        self.written: str | None = None
        self._stale = asyncio.Event()
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []

    def network_of(self, app: str) -> str:
        # Unknown yet: a network of the app alone, narrower than any it can be in.
        return self.networks.get(app) or f"app:{app}"

    def ruleset(self) -> str:
        ports = {self.network.veth(index): self.network_of(app)
                 for index, app in self.apps.items()}
        addresses = {address: self.network_of(app) for address, app in self.machines.values()}
        # This worker's own machines as it knows them, whatever the view says of an address.
        addresses.update({self.network.address(index): self.network_of(app)
                          for index, app in self.apps.items()})
        subnets = {*self.subnets.values(), str(self.network.subnet)}
        return fence4_ruleset(self.fence, ports, addresses, subnets)

    async def start(self, view: View | None, machines: Iterable[MachineRow]) -> None:
        """Fence the machines already here (a restart) and follow the view's rows."""
        # Beside any attached since the worker began serving (an attach keeps its app).
        self.apps = {**{row.ip_index: row.app for row in machines
                        if row.ip_index is not None and row.state != "destroyed"}, **self.apps}
        if self.other_table is not None:  # its bridge rule would drop what this lets through
            with contextlib.suppress(CommandFailed):
                await nftables.apply(removal(self.other_table))
        await self.write()
        if view is None:
            return
        tables = ("workers",) if self.fence.private else ("workers", "apps", "machines")
        self._tasks = [asyncio.create_task(self._follow(view, table)) for table in tables]
        self._tasks.append(asyncio.create_task(self._rewrite()))

    async def attach(self, app: str, index: int) -> None:
        """The machine of ``app`` at address ``index`` meets its network's machines."""
        self.apps[index] = app
        await self.write()

    async def detach(self, index: int | None) -> None:
        if index is not None and self.apps.pop(index, None) is not None:
            await self.write()

    async def write(self) -> None:
        async with self._lock:
            wanted = self.ruleset()
            if wanted != self.written:
                await nftables.apply(wanted)
                self.written = wanted

    def _take(self, change: RowChange) -> None:
        doc = change.doc
        if change.table == AppRow.TABLE:
            app = from_doc(AppRow, doc)
            if app is None:
                self.networks.pop(change.key, None)
            else:
                self.networks[change.key] = app_network(app)
        elif change.table == WorkerRow.TABLE:
            row = from_doc(WorkerRow, doc)
            subnet = row.subnet if row is not None else None
            if subnet:
                self.subnets[change.key] = subnet
            else:
                self.subnets.pop(change.key, None)
        else:
            address = str((doc or {}).get("private_ip") or "")
            if doc is None or doc.get("state") == "destroyed" or not _ipv4(address):
                self.machines.pop(change.key, None)
            else:
                self.machines[change.key] = (address, str(doc.get("app", "")))
        self._stale.set()

    async def _follow(self, view: View, table: str) -> None:
        while True:
            try:
                with view.subscribe(table) as feed:
                    async for change in feed:
                        self._take(change)
            except FeedLagged:
                log.warning("the fence fell behind the %s feed; reading it again", table)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("following %s for the fence failed", table)
                await asyncio.sleep(1)

    async def _rewrite(self) -> None:
        while True:
            await self._stale.wait()
            await asyncio.sleep(SETTLE)
            self._stale.clear()
            try:
                await self.write()
            except CommandFailed as exc:
                log.warning("could not write the fence %s: %s", self.fence.table, exc)

    async def stop(self, *, machines_stay: bool) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if not machines_stay:
            with contextlib.suppress(CommandFailed):
                await nftables.apply(removal(self.fence.table))


def _ipv4(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).version == 4
    except ValueError:
        return False
