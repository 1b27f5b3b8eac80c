"""The public ports apps' ``[[services]]`` ask for beyond HTTP's, and the machines behind each.

A service port other than 80 and 443 (those are the proxy's HTTP and TLS
listeners, routed by Host) is a listener of its own on the proxy's host:
``port`` (or ``start_port``..``end_port``) goes to the service's
``internal_port`` on the app's machines, handled as its ``handlers`` say:

    none          raw TCP, bytes passed through both ways
    tls           TLS ended at the proxy (the certificate by SNI), bytes to the machine
    http          HTTP, with the forwarded headers (tls + http: HTTPS on that port)
    proxy_proto   a PROXY protocol header first (v1, or v2 by proxy_proto_options),
                  so the machine learns the client's address

A local cluster has one address, so a port is one app's: two apps asking for
the same port, the first by name keeps it (``conflicts`` says who lost).
UDP services are not carried. Pure: rows in, listeners and backends out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from bodega.model.machine import Machine
from bodega.proxy.core.routes import Backend, RoutingTable

HTTP_PORTS = frozenset({80, 443})  # the proxy's own HTTP and TLS listeners


@dataclass(frozen=True)
class TcpListener:
    port: int
    end_port: int  # the same as ``port`` unless a range
    app: str  # the machines' internal_port is their slot's port (``Backend.port``)
    tls: bool = False
    http: bool = False
    proxy_proto: int = 0  # 0: none; 1 or 2: the PROXY protocol version sent first
    alpn: tuple[str, ...] = ()
    h2_backend: bool = False


Entries = list[tuple["TcpListener", Backend]]


def listeners_of(machine: Machine | None) -> Entries:
    """Every TCP listener a machine's row asks for (none: gone), each with the machine."""
    if machine is None or machine.state == "destroyed" or machine.config is None:
        return []
    out = []
    for index, service in enumerate(machine.config.services or []):
        if service.protocol != "tcp" or not service.internal_port:
            continue
        backend = Backend.from_machine(machine, index)
        if backend is None:
            continue
        for port in service.ports or []:
            first = port.port or port.start_port
            if not first or first in HTTP_PORTS:
                continue
            handlers = port.handlers or []
            proto = port.proxy_proto_options
            version = (proto.version if proto is not None else None) or "v1"
            out.append((TcpListener(
                port=first, end_port=port.end_port or first,
                app=backend.app, tls="tls" in handlers,
                http="http" in handlers,
                proxy_proto=(2 if version == "v2" else 1) if "proxy_proto" in handlers else 0,
                alpn=tuple((port.tls_options.alpn if port.tls_options else None) or ()),
                h2_backend=bool(port.http_options and port.http_options.h2_backend)),
                backend))
    return out


class TcpTable:
    def __init__(self) -> None:
        self._by_machine: dict[str, Entries] = {}
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def put(self, machine_id: str, new: Entries) -> None:
        """A machine's listeners (``listeners_of`` its row) changed."""
        old = self._by_machine.pop(machine_id, [])
        if new:
            self._by_machine[machine_id] = new
        if new != old:
            for listener in self._listeners:
                listener()

    def listeners(self) -> dict[int, TcpListener]:
        """Each port's listener: its app's first by name; within the app, the newest
        machine's spec (a deploy changing a port's handlers moves with its new machines)."""
        chosen: dict[int, tuple[str, str, TcpListener]] = {}
        for entries in self._by_machine.values():
            for listener, backend in entries:
                rank = (listener.app, _newest_first(backend.created_at))
                held = chosen.get(listener.port)
                if held is None or rank < held[:2]:
                    chosen[listener.port] = (*rank, listener)
        return {port: held[2] for port, held in sorted(chosen.items())}

    def conflicts(self) -> dict[int, list[str]]:
        """Ports asked for by more than one app: the apps that did not get them."""
        kept = self.listeners()
        lost: dict[int, set[str]] = {}
        for entries in self._by_machine.values():
            for listener, _ in entries:
                if kept[listener.port].app != listener.app:
                    lost.setdefault(listener.port, set()).add(listener.app)
        return {port: sorted(apps) for port, apps in lost.items()}

    def backends(self, port: int) -> list[Backend]:
        """The machines behind ``port``'s listener (of its app, with that service)."""
        listener = self.listeners().get(port)
        if listener is None:
            return []
        return sorted((backend for entries in self._by_machine.values()
                       for spec, backend in entries
                       if spec.port == port and spec.app == listener.app),
                      key=lambda b: b.machine_id)


    def apps(self) -> set[str]:
        return {listener.app for entries in self._by_machine.values()
                for listener, _ in entries}

    def machines(self, app: str) -> list[Backend]:
        """Each machine of ``app`` with a TCP service, once (as its first service's)."""
        return [entries[0][1] for entries in self._by_machine.values()
                if entries[0][0].app == app]

    def mark_rested(self, machine_id: str, state: str) -> None:
        """The proxy stopped or suspended it: out of its listeners' slots at once."""
        entries = self._by_machine.get(machine_id)
        if entries:
            self.put(machine_id, [(spec, replace(b, state=state)) for spec, b in entries])


class AllServices:
    """An app's machines with an HTTP service or TCP ones: what autostop looks over, so a
    machine serving only TCP sleeps when idle as an HTTP one does."""

    def __init__(self, http: RoutingTable, tcp: TcpTable) -> None:
        self.http = http
        self.tcp = tcp

    def apps(self) -> list[str]:
        return sorted(set(self.http.apps()) | self.tcp.apps())

    def backends(self, app: str) -> list[Backend]:
        found = {b.machine_id: b for b in self.tcp.machines(app)}
        found.update((b.machine_id, b) for b in self.http.backends(app))
        return [found[m] for m in sorted(found)]

    def worker_alive(self, name: str) -> bool:
        return self.http.worker_alive(name)

    def mark_rested(self, machine_id: str, state: str) -> None:
        self.http.mark_rested(machine_id, state)
        self.tcp.mark_rested(machine_id, state)


def _newest_first(created_at: str) -> str:
    """A key that sorts later timestamps first (ISO strings compare as times)."""
    return "".join(chr(0x10FFFF - ord(c)) for c in created_at)
