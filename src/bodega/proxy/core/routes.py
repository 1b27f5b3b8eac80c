"""The routing table: every app's machines that could serve HTTP, as the view describes them.

A machine (``Machine``, as its worker wrote its row) is a *backend* when its
config has a TCP service with an ``http`` handler; its address is the host its
worker publishes (``service_host``) and the service's internal port. Rows arrive
from the registry view, so the table is as fresh as gossip (within a second);
the liveness of each worker comes from membership, so a dead worker's machines
drop out at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from bodega.model.machine import Machine
from bodega.model.machine_config import Service

DEFAULT_SOFT_LIMIT = 20  # fly-proxy's defaults when a service sets none
# How long a connect to a machine may take before the request goes to another, on both data
# planes (``upstream.py``, HAProxy's ``timeout connect``). A machine whose host stopped
# answering drops the SYN rather than refusing it. Longer than a round trip between any two
# regions on Earth (about 0.3 s), far shorter than a client's patience; a SYN lost on the
# way costs the attempt, not the request.
CONNECT_TIMEOUT = 0.5
# A connect to the only machine that can take a request waits this long instead: a
# machine's accept queue overflowing in a burst drops SYNs as a lost host does, and TCP
# sends one again after a second. Giving up sooner would fail a request nothing else takes.
PATIENT_CONNECT_TIMEOUT = 3.0
# How long what the proxy sent a machine may go unacknowledged before the proxy takes the
# machine's host as gone, on both data planes (``TCP_USER_TIMEOUT``: ``upstream.py``,
# HAProxy's ``tcp-ut``). A request sent on a connection kept from before the host stopped
# answering is then given up after this and, when it may be sent twice, sent to another
# machine. A host that answers acknowledges within a round trip, and TCP sends a lost
# segment again within a few hundred milliseconds, so a second is never a slow network's;
# with ``CONNECT_TIMEOUT`` for the retry's connect it stays well inside a client's 2 s.
ACK_TIMEOUT = 1.0
# After the proxy starts a machine it routes to it at once, for this long trusting its own
# knowledge over view rows that still show the machine stopped or starting.
WOKEN_SECONDS = 10.0
ROUTABLE_STATES = frozenset({"started"})
SERVICE_CHECK_PREFIX = "servicecheck-"  # the worker names a service's checks so (as Fly does)
PASSING, WAITING, FAILING = "passing", "waiting", "failing"
WAKEABLE_STATES = frozenset({"stopped", "suspended", "created"})


@dataclass(frozen=True)
class Backend:
    machine_id: str
    app: str
    region: str
    worker: str
    state: str
    host: str
    port: int
    cordoned: bool = False
    soft_limit: int = DEFAULT_SOFT_LIMIT
    hard_limit: int | None = None
    autostart: bool = True
    autostop: str = "off"  # off, stop or suspend
    min_running: int = 0
    standbys: tuple[str, ...] = ()
    primary_region: str | None = None
    created_at: str = ""
    updated_at: str = ""
    instance_id: str = ""
    checks: str = PASSING  # its service checks: passing (or none), waiting, failing
    force_https: bool = False  # a plain HTTP request gets a 301 to the TLS port

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @classmethod
    def from_machine(cls, machine: Machine, index: int | None = None) -> Backend | None:
        """The backend a machine describes for its HTTP service (or for
        ``services[index]``); None if it has no such service or no address yet."""
        config = machine.config
        if config is None:
            return None
        services = config.services or []
        service = (next((s for s in services if _serves_http(s)), None) if index is None
                   else services[index] if index < len(services) else None)
        host = machine.service_host or machine.private_ip
        if service is None or not host or not machine.app:
            return None
        concurrency = service.concurrency
        env = config.env or {}
        return cls(
            machine_id=machine.id, app=machine.app, region=machine.region,
            worker=machine.worker or "", state=machine.state, host=host,
            port=service.internal_port, cordoned=bool(machine.cordoned),
            soft_limit=(concurrency.soft_limit if concurrency else None) or DEFAULT_SOFT_LIMIT,
            hard_limit=(concurrency.hard_limit if concurrency else None) or None,
            autostart=service.autostart is not False,
            autostop=service.autostop or "off",
            min_running=service.min_machines_running or 0,
            standbys=tuple(config.standbys or ()),
            primary_region=env.get("PRIMARY_REGION") or None,
            created_at=machine.created_at, updated_at=machine.updated_at,
            instance_id=machine.instance_id,
            checks=service_checks(machine),
            force_https=any(bool(p.force_https) for p in service.ports or []),
        )


def service_checks(machine: Machine) -> str:
    """How a machine's service checks stand: the one health input both data planes route on.

    ``passing`` when every service check passes, or the config has none (the
    machine then counts once its port accepts, as the proxy always did);
    ``failing`` when one is critical; ``waiting`` while one has not passed yet
    (a run's first probe is still to come, or the row predates checks).
    """
    services = machine.config.services or [] if machine.config is not None else []
    if not any(s.checks for s in services):
        return PASSING
    states = [c.status for c in machine.checks or []
              if c.name.startswith(SERVICE_CHECK_PREFIX)]
    if "critical" in states:
        return FAILING
    if not states or any(status != "passing" for status in states):
        return WAITING
    return PASSING


def _serves_http(service: Service) -> bool:
    return service.protocol == "tcp" and bool(service.internal_port) \
        and service.has_http_handler()


class RoutingTable:
    def __init__(self) -> None:
        self._by_id: dict[str, Backend] = {}
        self._by_app: dict[str, dict[str, Backend]] = {}
        self._apps: set[str] = set()
        self._workers: dict[str, str] = {}  # worker -> membership status
        # machine -> (until when, its row's updated_at when woken): see ``_woken_override``
        self._woken: dict[str, tuple[float, str]] = {}
        # machine -> (its row's updated_at, the state) when the proxy put it to rest
        self._rested: dict[str, tuple[str, str]] = {}
        self._listeners: list[Callable[[], None]] = []
        self._hostnames: dict[str, str] = {}  # a certificate's hostname -> its app

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every change (the HAProxy data plane follows the table)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    def put_machine(self, machine_id: str, machine: Machine | None) -> None:
        """A machine's row changed (None: it is gone)."""
        self._remove(machine_id)
        self._changed()
        if machine is None or machine.state == "destroyed":
            self._rested.pop(machine_id, None)
            return
        backend = Backend.from_machine(machine)
        if backend is not None:
            if self._woken_override(backend):
                backend = replace(backend, state="started")
            elif (rest := self._rested_override(backend)) is not None:
                backend = replace(backend, state=rest)
            if backend.checks == WAITING and self._woken_recently(machine_id):
                # The proxy started it and saw its port accept: trusted until a check fails.
                backend = replace(backend, checks=PASSING)
            self._put(backend)

    def _put(self, backend: Backend) -> None:
        self._by_id[backend.machine_id] = backend
        self._by_app.setdefault(backend.app, {})[backend.machine_id] = backend

    def _remove(self, machine_id: str) -> None:
        old = self._by_id.pop(machine_id, None)
        if old is not None:
            machines = self._by_app.get(old.app, {})
            machines.pop(machine_id, None)
            if not machines:
                self._by_app.pop(old.app, None)

    def _woken_override(self, backend: Backend) -> bool:
        """Whether a row is older news than the proxy's own start of that machine.

        Right after the proxy starts a machine, rows may still arrive that were
        written before (``stopped``) or during (``starting``) that start; the
        machine is started, so they are not believed. A row written after the
        start (a newer ``updated_at``) saying ``stopped`` is: it was stopped again.
        """
        until, updated_at = self._woken.get(backend.machine_id, (0.0, ""))
        if until < time.monotonic():
            self._woken.pop(backend.machine_id, None)
            return False
        if backend.state == "starting":
            return True
        return backend.state in ("stopped", "created") and backend.updated_at <= updated_at

    def _rested_override(self, backend: Backend) -> str | None:
        """The state the proxy put this machine in, while its rows are older news.

        A row written before the proxy stopped or suspended it (``started``, say, from a
        check's change) can arrive after: believed, the machine would be routed to and
        stopped again. A row written since (a newer ``updated_at``) is believed.
        """
        rested = self._rested.get(backend.machine_id)
        if rested is None:
            return None
        updated_at, state = rested
        if backend.updated_at > updated_at:
            del self._rested[backend.machine_id]
            return None
        return state

    def _woken_recently(self, machine_id: str) -> bool:
        until, _ = self._woken.get(machine_id, (0.0, ""))
        return until >= time.monotonic()

    def mark_started(self, machine_id: str, seconds: float = WOKEN_SECONDS) -> Backend | None:
        """The proxy itself started this machine and saw its port accept."""
        backend = self._by_id.get(machine_id)
        if backend is None:
            return None
        now = time.monotonic()
        for stale in [m for m, (until, _) in self._woken.items() if until < now]:
            del self._woken[stale]
        self._woken[machine_id] = (now + seconds, backend.updated_at)
        self._rested.pop(machine_id, None)
        checks = PASSING if backend.checks == WAITING else backend.checks
        backend = replace(backend, state="started", checks=checks)
        self._put(backend)
        self._changed()
        return backend

    def mark_rested(self, machine_id: str, state: str) -> None:
        """The proxy itself just stopped or suspended this machine: route nothing more to it.

        Its row says so a gossip round later; until then a request sent to a
        suspended machine would wait on a frozen process instead of waking it.
        """
        backend = self._by_id.get(machine_id)
        if backend is None:
            return
        self._woken.pop(machine_id, None)
        self._rested[machine_id] = (backend.updated_at, state)
        self._put(replace(backend, state=state))
        self._changed()

    def put_app(self, name: str, exists: bool) -> None:
        if exists:
            self._apps.add(name)
        else:
            self._apps.discard(name)
        self._changed()

    def set_worker(self, name: str, status: str) -> None:
        if self._workers.get(name) != status:
            self._workers[name] = status
            self._changed()

    def worker_alive(self, name: str) -> bool:
        return self._workers.get(name, "alive") == "alive"

    def worker_status(self, name: str) -> str:
        return self._workers.get(name, "alive")

    def known_app(self, app: str) -> bool:
        return app in self._apps or app in self._by_app

    def backends(self, app: str) -> list[Backend]:
        return list(self._by_app.get(app, {}).values())

    def get(self, machine_id: str) -> Backend | None:
        return self._by_id.get(machine_id)

    def on_worker(self, worker: str) -> Iterator[Backend]:
        return (b for b in self._by_id.values() if b.worker == worker)

    def apps(self) -> list[str]:
        return sorted(self._by_app)

    def set_hostnames(self, hostnames: Mapping[str, str]) -> None:
        """The hostnames the edge has certificates for, and their apps (``www.example.com``
        reaches ``hello`` as ``hello.<base-domain>`` does)."""
        if dict(hostnames) != self._hostnames:
            self._hostnames = dict(hostnames)
            self._changed()

    def app_for_hostname(self, hostname: str) -> str | None:
        return self._hostnames.get(hostname)

    def force_https(self, app: str) -> bool:
        return any(b.force_https for b in self.backends(app))
