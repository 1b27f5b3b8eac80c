"""From the routing table to HAProxy servers, and from one layout to the next. Pure functions.

HAProxy's config holds a pool of backends, each with a fixed number of
server *slots*. An app with an HTTP machine owns one backend of the pool
(the Host map names it); a machine the proxy would route to
(``balance.usable``: started, not cordoned, service checks passing, its worker alive) occupies a
slot of its app's backend; every other slot is empty (in maintenance).
Moving between layouts is then runtime-API commands only (``add map``/``del
map``, ``set server ... addr/weight/state``, ``set maxconn server``): a new
app takes a free backend, a new machine a free slot. Only when the pool or
an app's slots run out does the shape change, and only then is a (seamless)
reload needed; the reloaded config carries every slot's current server, so
nothing is lost across it.

A slot or backend emptied in one step is not refilled in the same step: a
machine that just left may still finish requests on its connections, and
changing that server's address under them would be wrong. It is reused from
the next step on.

When health checks exist, they plug in at ``wanted_servers``: the predicate
that makes a machine a server is the same one the Python data plane uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from bodega.proxy.balance import usable
from bodega.proxy.routes import Backend

MIN_SLOTS = 4
MIN_BACKENDS = 8
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
    backends: tuple[Slots, ...]  # the pool, by index
    apps: Mapping[str, int]  # app -> the backend it owns

    def slots(self, app: str) -> Slots:
        return self.backends[self.apps[app]] if app in self.apps else ()


EMPTY = Layout((), {})


@dataclass(frozen=True)
class Plan:
    layout: Layout
    commands: tuple[str, ...]
    reload: bool


def backend_name(index: int) -> str:
    return f"pool_{index}"


def server_name(slot: int) -> str:
    return f"s{slot}"


def host_key(app: str, base_domain: str) -> str:
    return f"{app}.{base_domain.strip('.').lower()}"


def room(used: int, at_least: int, minimum: int) -> int:
    """Room for twice what is used, in powers of two, so growth rarely reloads."""
    count = minimum
    while count < used * 2:
        count *= 2
    return max(count, at_least)


def wanted_servers(apps: Iterable[str], backends: Callable[[str], Sequence[Backend]],
                   alive: Callable[[str], bool], region: str) -> dict[str, list[ServerSpec]]:
    """Per app, the machines that should receive traffic now (an app may have none)."""
    return {app: [
        ServerSpec(b.machine_id, b.host, b.port,
                   LOCAL_WEIGHT if b.region == region else REMOTE_WEIGHT, b.hard_limit or 0)
        for b in sorted(backends(app), key=lambda b: b.machine_id) if usable(b, alive)]
        for app in apps}


def plan(current: Layout, wanted: Mapping[str, Sequence[ServerSpec]], hosts_map: str,
         base_domain: str) -> Plan:
    """The layout that serves ``wanted``, and the runtime commands that get there.

    ``reload`` is True when commands cannot get there (no free backend, or not
    enough free slots); the returned layout is then the one to render.
    """
    backends = list(current.backends)
    apps = dict(current.apps)
    commands: list[str] = []
    free = [i for i, slots in enumerate(current.backends)
            if i not in current.apps.values() and all(s is None for s in slots)]
    for app in sorted(set(current.apps) - set(wanted)):  # apps that left
        index = apps.pop(app)
        commands.append(f"del map {hosts_map} {host_key(app, base_domain)}")
        backends[index] = tuple(None for _ in backends[index])
        commands += slot_commands(backend_name(index), current.backends[index], backends[index])
    for app in sorted(wanted):
        index_or_none = apps.get(app)
        if index_or_none is None:
            if not free:
                return _fresh(current, wanted)
            index = free.pop(0)
            apps[app] = index
            new_app = True
        else:
            index = index_or_none
            new_app = False
        fitted = fit_slots(current.backends[index], wanted[app])
        if fitted is None:
            return _fresh(current, wanted)
        backends[index] = fitted
        commands += slot_commands(backend_name(index), current.backends[index], fitted)
        if new_app:  # route the host only once its servers are set
            commands.append(f"add map {hosts_map} {host_key(app, base_domain)} "
                            f"{backend_name(index)}")
    return Plan(Layout(tuple(backends), apps), tuple(commands), reload=False)


def fit_slots(old: Slots, specs: Sequence[ServerSpec]) -> Slots | None:
    """``specs`` in ``old``'s slots, each machine kept where it was; None if they do not fit."""
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
    """A new shape: every app keeps its backend and machines their slots; all grow."""
    apps = {app: i for app, i in current.apps.items() if app in wanted}
    free = [i for i in range(len(current.backends)) if i not in apps.values()]
    count = room(len(wanted), len(current.backends), MIN_BACKENDS)
    free += range(len(current.backends), count)
    for app in sorted(wanted):
        if app not in apps:
            apps[app] = free.pop(0)
    by_index = {i: app for app, i in apps.items()}
    backends: list[Slots] = []
    for index in range(count):
        old = current.backends[index] if index < len(current.backends) else ()
        specs = wanted.get(by_index.get(index, ""), [])
        size = room(len(specs), len(old), MIN_SLOTS)
        keep = {s.machine_id: i for i, s in enumerate(old) if s is not None}
        new: list[ServerSpec | None] = [None] * size
        for spec in specs:
            if spec.machine_id in keep:
                new[keep[spec.machine_id]] = spec
        open_ = [i for i, spec in enumerate(new) if spec is None]
        for spec, i in zip([s for s in specs if s.machine_id not in keep], open_, strict=False):
            new[i] = spec
        backends.append(tuple(new))
    return Plan(Layout(tuple(backends), apps), (), reload=True)


def slot_commands(backend: str, old: Slots, new: Slots) -> list[str]:
    """The runtime commands that turn ``backend``'s slots from ``old`` into ``new``."""
    out: list[str] = []
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
