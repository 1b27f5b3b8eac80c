"""TCP services in HAProxy: a frontend and a backend per listener, machines in slots. Pure.

    client ─▶ frontend tcp_<port> (mode tcp, or http; ssl by SNI for tls) ─▶ backend tcp_<port>
                 │                    leastconn over the app's near machines (send-proxy[-v2]
                 │                    for proxy_proto)
                 │                    └▶ server activator (backup, PROXY v2): bodega's TCP
                 │                       activator for that port wakes a stopped machine and
                 │                       pipes the connection to it
                 └ every near machine at its hard limit ─▶ backend tcp_<port>_far (the others)

The tiers are the HTTP ones (``layout.py``, ``balance.tiers``). Machines that
come and go are runtime commands on their slots, as for HTTP
(``layout.slot_commands``); a listener that appears, goes, or changes how it
is handled is a new shape: its port must be bound, so HAProxy reloads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bodega.proxy.core.tcp_routes import TcpListener
from bodega.proxy.haproxy.core.layout import (
    MIN_SLOTS,
    AppServers,
    ServerSpec,
    Slots,
    fit_slots,
    room,
    server_name,
    slot_commands,
    spill_condition,
)

TCP_TIMEOUT = "1h"  # idle time before a raw TCP connection is cut (data flowing resets it)


@dataclass(frozen=True)
class TcpLayout:
    listeners: Mapping[int, TcpListener]
    slots: Mapping[int, Slots]  # each listener's near machines
    far: Mapping[int, Slots]  # and the others


TCP_EMPTY = TcpLayout({}, {}, {})


@dataclass(frozen=True)
class TcpPlan:
    layout: TcpLayout
    commands: tuple[str, ...]
    reload: bool


def tcp_backend(port: int) -> str:
    return f"tcp_{port}"


def tcp_far_backend(port: int) -> str:
    return f"tcp_{port}_far"


def tcp_plan(current: TcpLayout, listeners: Mapping[int, TcpListener],
             wanted: Mapping[int, AppServers]) -> TcpPlan:
    """The layout serving ``listeners`` with ``wanted`` machines, and the commands to get there
    (or ``reload``, with the layout to render)."""
    if dict(current.listeners) != dict(listeners):
        return _fresh(current, listeners, wanted)
    slots: dict[int, Slots] = {}
    far: dict[int, Slots] = {}
    commands: list[str] = []
    for port in listeners:
        servers = wanted.get(port, AppServers())
        old, old_far = current.slots.get(port, ()), current.far.get(port, ())
        fitted, fitted_far = fit_slots(old, servers.near), fit_slots(old_far, servers.far)
        if fitted is None or fitted_far is None:
            return _fresh(current, listeners, wanted)
        slots[port], far[port] = fitted, fitted_far
        commands += slot_commands(tcp_backend(port), old, fitted)
        commands += slot_commands(tcp_far_backend(port), old_far, fitted_far)
    return TcpPlan(TcpLayout(dict(listeners), slots, far), tuple(commands), reload=False)


def _fresh(current: TcpLayout, listeners: Mapping[int, TcpListener],
           wanted: Mapping[int, AppServers]) -> TcpPlan:
    slots: dict[int, Slots] = {}
    far: dict[int, Slots] = {}
    for port in listeners:
        same = current.listeners.get(port) == listeners[port]
        servers = wanted.get(port, AppServers())
        slots[port] = _grown(current.slots.get(port, ()) if same else (), servers.near)
        far[port] = _grown(current.far.get(port, ()) if same else (), servers.far)
    return TcpPlan(TcpLayout(dict(listeners), slots, far), (), reload=True)


def _grown(old: Slots, specs: Sequence[ServerSpec]) -> Slots:
    grown: Slots = old + (None,) * (room(len(specs), len(old), MIN_SLOTS) - len(old))
    return fit_slots(grown, specs) or tuple(specs)


def render_tcp(layout: TcpLayout, bind_host: str, crt_list: str | None,
               activators: Mapping[int, int]) -> list[str]:
    """The config's TCP sections; ``activators``: each port's activator on loopback. A
    ``tls`` listener without a ``crt_list`` (the proxy has no certificates) is left out."""
    lines: list[str] = []
    for port, spec in sorted(layout.listeners.items()):
        if (spec.tls and crt_list is None) or port not in activators:
            continue
        mode = "http" if spec.http else "tcp"
        ports = f"{port}-{spec.end_port}" if spec.end_port != port else str(port)
        host = f"[{bind_host}]" if ":" in bind_host else bind_host
        alpn = spec.alpn or (("h2", "http/1.1") if spec.http else ())
        tls = (f" ssl crt-list {crt_list}" + (f" alpn {','.join(alpn)}" if alpn else "")
               if spec.tls else "")
        lines += ["", f"frontend {tcp_backend(port)}", f"    # {spec.app}: port {ports}",
                  f"    mode {mode}", f"    bind {host}:{ports}{tls}",
                  f"    timeout client {TCP_TIMEOUT}"]
        if not spec.http:  # the defaults' HTTP option, which HAProxy warns it ignores here
            lines.append("    no option idle-close-on-response")
        if spec.http:
            proto = "https" if spec.tls else "http"
            lines += ["    option forwardfor",
                      f"    http-request set-header x-forwarded-proto {proto}",
                      "    http-request set-header x-forwarded-port %[dst_port]",
                      "    http-request set-header fly-client-ip %[src]"]
        near, far = tcp_backend(port), tcp_far_backend(port)
        lines += [f"    use_backend {far} if {spill_condition(near, far)}",
                  f"    default_backend {near}"]
        send = {0: "", 1: " send-proxy", 2: " send-proxy-v2"}[spec.proxy_proto]
        h2 = " proto h2" if spec.h2_backend else ""
        for name, slots in ((near, layout.slots.get(port, ())), (far, layout.far.get(port, ()))):
            lines += ["", f"backend {name}", f"    mode {mode}", "    balance leastconn",
                      f"    timeout server {TCP_TIMEOUT}"]
            for i, slot in enumerate(slots):
                if slot is None:
                    lines.append(f"    server {server_name(i)} 127.0.0.1:9 disabled{send}{h2}")
                else:
                    limit = f" maxconn {slot.maxconn}" if slot.maxconn else ""
                    lines.append(f"    server {server_name(i)} {slot.host}:{slot.port}"
                                 f"{limit}{send}{h2}")
            if name == near:  # see config.py: the far backend has no backup, on purpose
                lines.append(f"    server activator 127.0.0.1:{activators[port]} backup "
                             "send-proxy-v2")
    return lines
