"""From the routing table to HAProxy servers, and from one layout to the next. Pure functions.

HAProxy's config holds a pool of backends, each with a fixed number of
server *slots*. An app with an HTTP machine owns one backend of the pool
(the Host map names it) and its companion, the *far* backend of the same
index; a machine the proxy would route to (``balance.usable``: started, not
cordoned, service checks passing, its worker alive) occupies a slot of one of
the two, by the tier ``balance.tiers`` puts it in: the near backend holds the
proxy's region's machines (every region's when none there can serve), the far
one the others, which the frontend sends a request to only while every near
machine is at its hard limit (``config.py``). Every other slot is empty (in
maintenance). Moving between layouts is then runtime-API commands only
(``add map``/``del map``, ``set server ... addr/state``, ``set maxconn
server``): a new app takes a free backend, a new machine a free slot, a
machine that changes tier a slot of the other backend. Only when the pool or
an app's slots run out does the shape change, and only then is a (seamless)
reload needed; the reloaded config carries every slot's current server, so
nothing is lost across it.

A slot emptied of a machine is *leaving* (``Layout.leaving``): the machine
may still be answering requests it took there (a cordoned machine draining,
one being stopped), so its sessions are still counted as that machine's, and
the slot is not refilled (changing its address under them would be wrong, and
its counts would mix two machines) until a look at HAProxy's counters finds
none open (``settled``). An autoscaler draining a cordoned machine thus sees its
requests in flight until they end, however long they take.

The predicate that makes a machine a server, and its tier, are the ones the
Python data plane uses (``wanted_servers``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from bodega.proxy.core.balance import tiers
from bodega.proxy.core.routes import Backend

MIN_SLOTS = 4
MIN_BACKENDS = 8


@dataclass(frozen=True)
class ServerSpec:
    machine_id: str
    host: str
    port: int
    maxconn: int  # 0: no limit (no hard_limit set)


@dataclass(frozen=True)
class AppServers:
    """An app's servers by tier: ``near`` first, ``far`` only while every near one is full."""

    near: tuple[ServerSpec, ...] = ()
    far: tuple[ServerSpec, ...] = ()


Slots = tuple[ServerSpec | None, ...]
Slot = tuple[str, str]  # (backend, server), as HAProxy names a server


@dataclass(frozen=True)
class Layout:
    backends: tuple[Slots, ...]  # the pool's near backends, by index
    apps: Mapping[str, int]  # app -> the backend it owns (and the far one of that index)
    far: tuple[Slots, ...]  # the far backend of each index, as long as ``backends``
    # Slots emptied while their machine may still answer requests there: (app, machine).
    leaving: Mapping[Slot, tuple[str, str]] = field(default_factory=dict)

    def slots(self, app: str) -> Slots:
        return self.backends[self.apps[app]] if app in self.apps else ()

    def far_slots(self, app: str) -> Slots:
        return self.far[self.apps[app]] if app in self.apps else ()

    def machines(self) -> dict[tuple[str, str], tuple[str, str]]:
        """(backend, server) -> (app, machine) for every slot holding a machine."""
        found: dict[tuple[str, str], tuple[str, str]] = {}
        for app, index in self.apps.items():
            for name, slots in ((backend_name(index), self.backends[index]),
                                (far_name(index), self.far[index])):
                for i, spec in enumerate(slots):
                    if spec is not None:
                        found[(name, server_name(i))] = (app, spec.machine_id)
        return found

    def counted(self) -> dict[Slot, tuple[str, str]]:
        """(backend, server) -> (app, machine) for every slot whose sessions are a
        machine's: those holding one, and those it is leaving."""
        return {**self.leaving, **self.machines()}

    def taken(self, name: str, count: int) -> frozenset[int]:
        """The slots of backend ``name`` that are not free: leaving ones."""
        return frozenset(i for i in range(count) if (name, server_name(i)) in self.leaving)


EMPTY = Layout((), {}, ())


@dataclass(frozen=True)
class Plan:
    layout: Layout
    commands: tuple[str, ...]
    reload: bool


def backend_name(index: int) -> str:
    return f"pool_{index}"


def far_name(index: int) -> str:
    return f"far_{index}"


def spill_condition(near: str, far: str) -> str:
    """HAProxy's condition for sending a request to the ``far`` backend instead of ``near``:
    every near machine is at its hard limit and a far one has room.

    HAProxy's own balancing cannot say "nearest first": ``leastconn`` gives every idle
    server the same key whatever its weight, so at low load requests went round the
    regions in turn. ``backup`` servers are only taken once every other one is down, not
    full (a full backend queues). So the tiers are two backends, chosen per request by
    ``be_conn_free``: the free connection slots (``maxconn`` = ``hard_limit``) of the
    backend's servers that are up, ``-1`` when one of them has no limit, and ``0`` when
    none is up. In the near backend, whose backup is the activator, that is 0 only when
    some near machine is up and every one that is up is full; when HAProxy has marked
    every near machine down (a refused or timed-out connect, before the view says so)
    the activator (no limit) counts, and the request goes to it, which picks by the same
    rule (``balance.choose``). The far backend has no backup for that reason: its 0 means
    "no far machine has room", and the request then queues in the near backend for the
    first free slot (``timeout queue``) instead of going to the activator past the limits.
    """
    return f"{{ be_conn_free({near}) eq 0 }} !{{ be_conn_free({far}) eq 0 }}"


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
                   alive: Callable[[str], bool], region: str) -> dict[str, AppServers]:
    """Per app, the machines that should receive traffic now, by tier (an app may have none)."""
    wanted = {}
    for app in apps:
        tiered = tiers(sorted(backends(app), key=lambda b: b.machine_id), region, alive)
        wanted[app] = AppServers(tuple(_spec(b) for b in tiered.near),
                                 tuple(_spec(b) for b in tiered.far))
    return wanted


Endpoint = tuple[str, str, int]  # a machine and the address its service listens on


def endpoint(spec: ServerSpec) -> Endpoint:
    return (spec.machine_id, spec.host, spec.port)


def in_slots(layout: Layout) -> set[Endpoint]:
    return {endpoint(spec) for slots in (*layout.backends, *layout.far)
            for spec in slots if spec is not None}


def admitted(wanted: Mapping[str, AppServers], current: Layout,
             accepting: Collection[Endpoint]) -> tuple[dict[str, AppServers], set[Endpoint]]:
    """``wanted`` less the machines that would be new to a slot while their port has not
    yet accepted a connect from this proxy, and those machines (to be tried).

    A machine is routable once started, but its program may take a moment more to
    listen: a request HAProxy sent it then is refused, and the retry goes to the least
    busy slot again, which is another machine just started when several start at once
    (a scale-out), until the retries run out and the client gets a 503. So a machine
    enters a slot only once its port has accepted, as the activator forwards only once
    it does; until then its requests go to the app's other machines. A machine already
    in a slot (of either tier) stays there. An app none of whose machines would be left
    keeps them all: its requests have nowhere better to go, and a refused connect marks
    the machine down and sends the request to the activator, which waits for the port."""
    held = in_slots(current)
    waiting: set[Endpoint] = set()
    out: dict[str, AppServers] = {}
    for app, servers in wanted.items():
        ready = AppServers(*(tuple(spec for spec in specs if endpoint(spec) in held
                                   or endpoint(spec) in accepting)
                             for specs in (servers.near, servers.far)))
        if not ready.near and not ready.far:
            out[app] = servers
            continue
        out[app] = ready
        waiting |= {endpoint(spec) for spec in (*servers.near, *servers.far)} - {
            endpoint(spec) for spec in (*ready.near, *ready.far)}
    return out, waiting


def _spec(backend: Backend) -> ServerSpec:
    return ServerSpec(backend.machine_id, backend.host, backend.port, backend.hard_limit or 0)


def plan(current: Layout, wanted: Mapping[str, AppServers], hosts_map: str,
         base_domain: str) -> Plan:
    """The layout that serves ``wanted``, and the runtime commands that get there.

    ``reload`` is True when commands cannot get there (no free backend, or not
    enough free slots in a tier); the returned layout is then the one to render.
    """
    near, far = list(current.backends), list(current.far)
    apps = dict(current.apps)
    commands: list[str] = []
    free = [i for i, slots in enumerate(current.backends)
            if i not in current.apps.values() and all(s is None for s in slots + far[i])
            and not current.taken(backend_name(i), len(slots))
            and not current.taken(far_name(i), len(far[i]))]
    for app in sorted(set(current.apps) - set(wanted)):  # apps that left
        index = apps.pop(app)
        commands.append(f"del map {hosts_map} {host_key(app, base_domain)}")
        near[index] = tuple(None for _ in near[index])
        far[index] = tuple(None for _ in far[index])
        commands += slot_commands(backend_name(index), current.backends[index], near[index])
        commands += slot_commands(far_name(index), current.far[index], far[index])
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
        fitted_near = fit_slots(current.backends[index], wanted[app].near,
                                current.taken(backend_name(index), len(near[index])))
        fitted_far = fit_slots(current.far[index], wanted[app].far,
                               current.taken(far_name(index), len(far[index])))
        if fitted_near is None or fitted_far is None:
            return _fresh(current, wanted)
        near[index], far[index] = fitted_near, fitted_far
        # Near first: a machine that moves from the far tier is ready there before it
        # leaves the far backend.
        commands += slot_commands(backend_name(index), current.backends[index], fitted_near)
        commands += slot_commands(far_name(index), current.far[index], fitted_far)
        if new_app:  # route the host only once its servers are set
            commands.append(f"add map {hosts_map} {host_key(app, base_domain)} "
                            f"{backend_name(index)}")
    return Plan(Layout(tuple(near), apps, tuple(far), leaving_after(current, near, far)),
                tuple(commands), reload=False)


def leaving_after(current: Layout, near: Sequence[Slots],
                  far: Sequence[Slots]) -> dict[Slot, tuple[str, str]]:
    """The leaving slots once ``current``'s backends become ``near`` and ``far``: those
    still leaving, and those whose machine left in this step."""
    by_index = {i: app for app, i in current.apps.items()}
    out = dict(current.leaving)
    for name, olds, news in ((backend_name, current.backends, near),
                             (far_name, current.far, far)):
        for index, (old, new) in enumerate(zip(olds, news, strict=True)):
            for i, (before, after) in enumerate(zip(old, new, strict=True)):
                if before is not None and after is None and index in by_index:
                    out[(name(index), server_name(i))] = (by_index[index], before.machine_id)
    return out


def settled(layout: Layout, open_sessions: Mapping[Slot, int]) -> Layout:
    """``layout`` less the leaving slots a look at HAProxy's counters found with no session
    open (current and queued: ``open_sessions``); one not in the look stays leaving."""
    kept = {slot: who for slot, who in layout.leaving.items()
            if open_sessions.get(slot, 1) > 0}
    return layout if len(kept) == len(layout.leaving) else replace(layout, leaving=kept)


def fit_slots(old: Slots, specs: Sequence[ServerSpec],
              taken: Collection[int] = ()) -> Slots | None:
    """``specs`` in ``old``'s slots, each machine kept where it was, none in a slot of
    ``taken`` (leaving); None if they do not fit."""
    by_id = {s.machine_id: s for s in specs}
    new: list[ServerSpec | None] = [
        by_id.get(spec.machine_id) if spec is not None else None for spec in old]
    placed = {s.machine_id for s in new if s is not None}
    free = [i for i, spec in enumerate(old) if spec is None and i not in taken]
    for spec in specs:
        if spec.machine_id in placed:
            continue
        if not free:
            return None
        new[free.pop(0)] = spec
    return tuple(new)


def _fresh(current: Layout, wanted: Mapping[str, AppServers]) -> Plan:
    """A new shape: every app keeps its backend and machines their slots; all grow."""
    apps = {app: i for app, i in current.apps.items() if app in wanted}
    free = [i for i in range(len(current.backends)) if i not in apps.values()]
    count = room(len(wanted), len(current.backends), MIN_BACKENDS)
    free += range(len(current.backends), count)
    for app in sorted(wanted):
        if app not in apps:
            apps[app] = free.pop(0)
    by_index = {i: app for app, i in apps.items()}
    near: list[Slots] = []
    far: list[Slots] = []
    for index in range(count):
        servers = wanted.get(by_index.get(index, ""), AppServers())
        near.append(_grown(current.backends[index] if index < len(current.backends) else (),
                           servers.near))
        far.append(_grown(current.far[index] if index < len(current.far) else (), servers.far))
    return Plan(Layout(tuple(near), apps, tuple(far)), (), reload=True)


def _grown(old: Slots, specs: Sequence[ServerSpec]) -> Slots:
    """``specs`` in slots with room to grow, each machine kept in its slot of ``old``."""
    keep = {s.machine_id: i for i, s in enumerate(old) if s is not None}
    new: list[ServerSpec | None] = [None] * room(len(specs), len(old), MIN_SLOTS)
    for spec in specs:
        if spec.machine_id in keep:
            new[keep[spec.machine_id]] = spec
    open_ = [i for i, spec in enumerate(new) if spec is None]
    for spec, i in zip([s for s in specs if s.machine_id not in keep], open_, strict=False):
        new[i] = spec
    return tuple(new)


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
        if before is None or before.maxconn != after.maxconn:
            out.append(f"set maxconn server {server} {after.maxconn}")
        if before is None:
            out.append(f"set server {server} state ready")
    return out
