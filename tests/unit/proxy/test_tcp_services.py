"""TCP services as pure decisions: listeners from rows, a port per app, PROXY headers, and
HAProxy's TCP sections planned (runtime commands for machines, a reload for a new port)."""

from __future__ import annotations

from typing import Any

import pytest

from bodega.model.machine import Machine
from bodega.proxy.core.proxy_protocol import (
    V2_HEADER,
    Addresses,
    BadHeader,
    encode,
    parse_v2,
    v2_length,
)
from bodega.proxy.core.tcp_routes import Entries, TcpListener, TcpTable
from bodega.proxy.core.tcp_routes import listeners_of as machine_listeners
from bodega.proxy.haproxy.core.layout import AppServers, ServerSpec
from bodega.proxy.haproxy.core.tcp_layout import TCP_EMPTY, render_tcp, tcp_plan


def listeners_of(row: dict[str, Any] | None) -> Entries:
    """The listeners of a machine row as the proxy reads it from the view."""
    return machine_listeners(Machine.model_validate(row) if row is not None else None)


def doc(mid: str, app: str, ports: list[dict[str, Any]], created: str = "a",
        protocol: str = "tcp") -> dict[str, Any]:
    return {"id": mid, "app": app, "state": "started", "worker": "w", "region": "ams",
            "service_host": "10.0.0.1", "created_at": created,
            "config": {"image": "app", "services": [
                {"protocol": protocol, "internal_port": 5000, "ports": ports}]}}


def test_a_rows_ports_become_listeners_but_http_ports_and_udp_do_not() -> None:
    row = doc("m1", "db", [{"port": 80, "handlers": ["http"]}, {"port": 443},
                           {"port": 5432, "handlers": ["tls"]},
                           {"port": 6000, "handlers": ["proxy_proto"],
                            "proxy_proto_options": {"version": "v2"}},
                           {"start_port": 7000, "end_port": 7010}])
    found = [listener for listener, _ in listeners_of(row)]
    assert found == [TcpListener(5432, 5432, "db", tls=True),
                     TcpListener(6000, 6000, "db", proxy_proto=2),
                     TcpListener(7000, 7010, "db")]
    assert {b.address for _, b in listeners_of(row)} == {("10.0.0.1", 5000)}
    assert listeners_of(doc("m1", "db", [{"port": 53}], protocol="udp")) == []
    assert listeners_of(None) == []


def test_a_port_is_one_apps_and_the_newest_machine_says_how() -> None:
    table = TcpTable()
    table.put("m1", listeners_of(doc("m1", "zeta", [{"port": 5432}])))
    table.put("m2", listeners_of(doc("m2", "alpha", [{"port": 5432}], created="a")))
    table.put("m3", listeners_of(doc("m3", "alpha", [{"port": 5432, "handlers": ["tls"]}],
                                     created="b")))
    assert table.listeners() == {5432: TcpListener(5432, 5432, "alpha", tls=True)}
    assert table.conflicts() == {5432: ["zeta"]}
    assert [b.machine_id for b in table.backends(5432)] == ["m2", "m3"]


def test_proxy_protocol_headers_say_who_the_client_is() -> None:
    who = Addresses(("192.0.2.7", 40000), ("10.0.0.1", 5432))
    assert encode(who, 1) == b"PROXY TCP4 192.0.2.7 10.0.0.1 40000 5432\r\n"
    v2 = encode(who, 2)
    assert parse_v2(v2[:V2_HEADER], v2[V2_HEADER:V2_HEADER + v2_length(v2[:V2_HEADER])]) == who
    six = Addresses(("2001:db8::1", 1), ("2001:db8::2", 2))
    v2 = encode(six, 2)
    assert parse_v2(v2[:V2_HEADER], v2[V2_HEADER:]) == six
    assert encode(Addresses(None, None), 1) == b"PROXY UNKNOWN\r\n"
    with pytest.raises(BadHeader):
        v2_length(b"GET / HTTP/1.1\r\n")


def spec(mid: str, port: int = 5000) -> ServerSpec:
    return ServerSpec(mid, "10.0.0.1", port, 0)


def near(*specs: ServerSpec) -> AppServers:
    return AppServers(tuple(specs))


def test_a_new_listener_is_a_reload_and_machines_after_it_are_commands() -> None:
    listeners = {5432: TcpListener(5432, 5432, "db", proxy_proto=2)}
    first = tcp_plan(TCP_EMPTY, listeners, {5432: near(spec("m1"))})
    assert first.reload
    assert first.layout.slots[5432][0] == spec("m1")
    second = tcp_plan(first.layout, listeners,
                      {5432: AppServers((spec("m1"), spec("m2", 5001)), (spec("m3"),))})
    assert not second.reload
    assert second.commands == ("set server tcp_5432/s1 addr 10.0.0.1 port 5001",
                               "set maxconn server tcp_5432/s1 0",
                               "set server tcp_5432/s1 state ready",
                               "set server tcp_5432_far/s0 addr 10.0.0.1 port 5000",
                               "set maxconn server tcp_5432_far/s0 0",
                               "set server tcp_5432_far/s0 state ready")
    changed = {5432: TcpListener(5432, 5432, "db", proxy_proto=1)}
    assert tcp_plan(second.layout, changed, {5432: near(spec("m1"))}).reload
    text = "\n".join(render_tcp(first.layout, "127.0.0.1", "/h/certs.list", {5432: 9999}))
    assert "    bind 127.0.0.1:5432\n" in text + "\n"
    assert "    server s0 10.0.0.1:5000 send-proxy-v2" in text
    # The machines elsewhere only while every near one is at its hard limit; only the
    # near backend falls back on the activator.
    assert ("    use_backend tcp_5432_far if { be_conn_free(tcp_5432) eq 0 } "
            "!{ be_conn_free(tcp_5432_far) eq 0 }\n    default_backend tcp_5432\n") in text
    near_part, far_part = text.split("backend tcp_5432_far\n")
    assert "    server activator 127.0.0.1:9999 backup send-proxy-v2" in near_part
    assert "activator" not in far_part


def test_tls_and_http_handlers_render_an_https_frontend_and_tls_needs_certificates() -> None:
    listeners = {8443: TcpListener(8443, 8443, "web", tls=True, http=True)}
    layout = tcp_plan(TCP_EMPTY, listeners, {}).layout
    text = "\n".join(render_tcp(layout, "0.0.0.0", "/h/certs.list", {8443: 1}))
    assert "bind 0.0.0.0:8443 ssl crt-list /h/certs.list alpn h2,http/1.1" in text
    assert "mode http" in text
    assert "http-request set-header x-forwarded-proto https" in text
    assert render_tcp(layout, "0.0.0.0", None, {8443: 1}) == []


def test_h2_backend_speaks_http2_to_the_machines_of_an_http_port() -> None:
    row = doc("m1", "grpc", [{"port": 50051, "handlers": ["http"],
                              "http_options": {"h2_backend": True}}])
    (listener, _), = listeners_of(row)
    assert listener.h2_backend
    assert listener.http
    layout = tcp_plan(TCP_EMPTY, {50051: listener}, {50051: near(spec("m1"))}).layout
    text = "\n".join(render_tcp(layout, "127.0.0.1", None, {50051: 7}))
    assert "    server s0 10.0.0.1:5000 proto h2" in text
    assert "    server activator 127.0.0.1:7 backup send-proxy-v2" in text
