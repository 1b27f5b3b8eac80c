"""From the routing table to HAProxy servers, and from one layout to the next. Pure functions.

Every app with an HTTP machine gets a backend with a fixed number of server
*slots*. A machine the proxy would route to (``balance.usable``: started,
not cordoned, its worker alive) occupies a slot; everything else leaves its
slot empty (in maintenance). Moving between layouts is then runtime-API
commands only (``set server ... addr/weight/state``, ``set maxconn server``)
unless the *shape* changes: a new app, or an app needing more slots than it
has. Only then is a reload needed, and the reloaded config carries every
slot's current server, so nothing is lost across it.

A slot emptied in one step is not refilled in the same step: a machine that
just left may still finish requests on its connections, and changing that
server's address under them would be wrong. It is reused from the next step.

When health checks exist, they plug in at ``wanted_servers``: the predicate
that makes a machine a server is the same one the Python data plane uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from bodega.proxy.balance import usable
from bodega.proxy.routes import Backend

MIN_SLOTS = 4
LOCAL_WEIGHT = 100  # nearest region first: leastconn divides by weight,
REMOTE_WEIGHT = 1  # so a remote machine gets traffic only when local ones are loaded or gone


@dataclass(frozen=True)
class ServerSpec:
    machine_id: str
    host: str
    port: int
    weight: int
    maxconn: int  # 0: no limit (no hard_limit set)


Slots = tuple[ServerSpec | None, ...]


@dataclass(frozen=True)
class Layout:
    apps: Mapping[str, Slots]

    def machine_slot(self, app: str, machine_id: str) -> int | None:
        for i, spec in enumerate(self.apps.get(app, ())):
            if spec is not None and spec.machine_id == machine_id:
                return i
        return None


EMPTY = Layout({})


@dataclass(frozen=True)
class Plan:
    layout: Layout
    commands: tuple[str, ...]
    reload: bool


def backend_name(app: str) -> str:
    return f"app_{app}"


def server_name(slot: int) -> str:
    return f"s{slot}"


def slot_count(servers: int, at_least: int = 0) -> int:
    """Room for twice the servers, in powers of two, so growth rarely reloads."""
    count = MIN_SLOTS
    while count < servers * 2:
        count *= 2
    return max(count, at_least)


def wanted_servers(apps: Iterable[str], backends: Callable[[str], Sequence[Backend]],
                   alive: Callable[[str], bool], region: str) -> dict[str, list[ServerSpec]]:
    """Per app, the machines that should receive traffic now (an app may have none)."""
    wanted: dict[str, list[ServerSpec]] = {}
    for app in apps:
        wanted[app] = [
            ServerSpec(b.machine_id, b.host, b.port,
                       LOCAL_WEIGHT if b.region == region else REMOTE_WEIGHT,
                       b.hard_limit or 0)
            for b in sorted(backends(app), key=lambda b: b.machine_id) if usable(b, alive)]
    return wanted


def plan(current: Layout, wanted: Mapping[str, Sequence[ServerSpec]]) -> Plan:
    """The layout that serves ``wanted``, and the runtime commands that get there.

    ``reload`` is True when the commands cannot get there (a new app, or not
    enough free slots); the returned layout is then the one to render.
    """
    slots: dict[str, Slots] = {}
    commands: list[str] = []
    for app, specs in wanted.items():
        old = current.apps.get(app)
        fitted = _fit(old, specs) if old is not None else None
        if fitted is None:
            return _fresh(current, wanted)
        slots[app] = fitted
        assert old is not None
        commands += _commands(app, old, fitted)
    for app, old in current.apps.items():  # apps that left: empty their slots, keep the backend
        if app not in wanted:
            emptied: Slots = tuple(None for _ in old)
            slots[app] = emptied
            commands += _commands(app, old, emptied)
    return Plan(Layout(slots), tuple(commands), reload=False)


def _fit(old: Slots, specs: Sequence[ServerSpec]) -> Slots | None:
    by_id = {s.machine_id: s for s in specs}
    new: list[ServerSpec | None] = [
        by_id.get(spec.machine_id) if spec is not None else None for spec in old]
    placed = {s.machine_id for s in new if s is not None}
    free = [i for i, spec in enumerate(old) if spec is None]
    for spec in specs:
        if spec.machine_id in placed:
            continue
        if not free:
            return None
        new[free.pop(0)] = spec
    return tuple(new)


def _fresh(current: Layout, wanted: Mapping[str, Sequence[ServerSpec]]) -> Plan:
    """A new shape: keep every machine's slot where it can stay, grow where needed."""
    slots: dict[str, Slots] = {}
    for app, specs in wanted.items():
        old = current.apps.get(app, ())
        count = slot_count(len(specs), len(old))
        keep = {s.machine_id: i for i, s in enumerate(old) if s is not None}
        new: list[ServerSpec | None] = [None] * count
        for spec in specs:
            if spec.machine_id in keep:
                new[keep[spec.machine_id]] = spec
        rest = [s for s in specs if s.machine_id not in keep]
        free = [i for i, spec in enumerate(new) if spec is None]
        for spec, i in zip(rest, free, strict=False):
            new[i] = spec
        slots[app] = tuple(new)
    return Plan(Layout(slots), (), reload=True)


def _commands(app: str, old: Slots, new: Slots) -> list[str]:
    out: list[str] = []
    backend = backend_name(app)
    for i, (before, after) in enumerate(zip(old, new, strict=True)):
        server = f"{backend}/{server_name(i)}"
        if before == after:
            continue
        if after is None:
            out.append(f"set server {server} state maint")
            continue
        if before is None or (before.host, before.port) != (after.host, after.port):
            out.append(f"set server {server} addr {after.host} port {after.port}")
        if before is None or before.weight != after.weight:
            out.append(f"set server {server} weight {after.weight}")
        if before is None or before.maxconn != after.maxconn:
            out.append(f"set maxconn server {server} {after.maxconn}")
        if before is None:
            out.append(f"set server {server} state ready")
    return out
