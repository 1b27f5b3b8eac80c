"""Which gossip (and WireGuard) port each component of `bodega up` gets, and how a failed
bind is worded."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

from bodega.cli.daemons.core.listeners import Listener, as_bind_error, flag_hint
from bodega.cluster.port_claims import PortClaims
from bodega.cluster.ports import (
    EVERY_ADDRESS,
    RememberedPorts,
    choose_wireguard,
    consecutive,
    plan_gossip,
    remember,
    remembered,
    udp_taken,
)
from bodega.runtime.binding import BindError

NAMES = ["ams-1", "ams-2", "broker", "proxy"]


def test_first_start_takes_fresh_ports_in_order() -> None:
    plan = plan_gossip(NAMES, {}, set(), [5001, 5002, 5003, 5004])
    assert plan.ports == {"ams-1": 5001, "ams-2": 5002, "broker": 5003, "proxy": 5004}
    assert plan.moved == {}


def test_remembered_ports_are_kept_while_free() -> None:
    before = {"ams-1": 7001, "ams-2": 7002, "broker": 7003, "proxy": 7004}
    plan = plan_gossip(NAMES, before, set(), [9001, 9002, 9003, 9004])
    assert plan.ports == before
    assert plan.moved == {}


def test_a_taken_remembered_port_moves_and_is_reported() -> None:
    before = {"ams-1": 7001, "ams-2": 7002, "broker": 7003, "proxy": 7004}
    plan = plan_gossip(NAMES, before, {7002}, [9001, 9002])
    assert plan.ports == {"ams-1": 7001, "ams-2": 9001, "broker": 7003, "proxy": 7004}
    assert plan.moved == {"ams-2": (7002, 9001)}


def test_a_fresh_port_that_another_component_remembers_is_not_given_twice() -> None:
    # The kernel may call a remembered (free) port free: it must stay with its owner.
    before = {"ams-1": 7001, "broker": 7003}
    plan = plan_gossip(NAMES, before, set(), [7003, 9001, 7001, 9002])
    assert plan.ports == {"ams-1": 7001, "ams-2": 9001, "broker": 7003, "proxy": 9002}
    assert len(set(plan.ports.values())) == len(NAMES)


def test_a_new_component_gets_a_port_beside_remembered_ones() -> None:
    plan = plan_gossip(["ams-1", "ams-2", "ams-3"], {"ams-1": 7001, "ams-2": 7002}, set(),
                       [9001])
    assert plan.ports == {"ams-1": 7001, "ams-2": 7002, "ams-3": 9001}
    assert plan.moved == {}


def test_gossip_port_flag_means_consecutive_ports() -> None:
    assert consecutive(NAMES, 7946) == {"ams-1": 7946, "ams-2": 7947, "broker": 7948,
                                        "proxy": 7949}


def test_ports_file_round_trips_and_garbage_is_forgotten(tmp_path: Path) -> None:
    assert remembered(tmp_path).gossip == {}
    remember(tmp_path, RememberedPorts(gossip={"ams-1": 7001}))
    assert remembered(tmp_path).gossip == {"ams-1": 7001}
    (tmp_path / "ports.json").write_text('{"gossip": {"ams-1": "x"}}')
    assert remembered(tmp_path).gossip == {}
    (tmp_path / "ports.json").write_text('{"gossip": {}, "surprise": 1}')
    assert remembered(tmp_path).gossip == {}


def in_use(host: str, port: int, transport: str) -> BindError:
    return BindError(OSError(errno.EADDRINUSE, "Address already in use"), host, port, transport)


def test_bind_error_names_the_address() -> None:
    assert str(in_use("127.0.0.1", 4280, "TCP")) == (
        "cannot listen on 127.0.0.1:4280 (TCP): address already in use")
    assert str(in_use("::1", 53, "UDP")) == (
        "cannot listen on [::1]:53 (UDP): address already in use")


def test_the_flag_is_the_listener_of_that_transport_and_port() -> None:
    listeners = (Listener("--listen", "TCP", 8080), Listener("--admin-listen", "TCP", 9000),
                 Listener("--gossip-listen", "UDP", 8080))
    assert flag_hint(in_use("0.0.0.0", 8080, "TCP"), listeners) == "move it with --listen"
    assert flag_hint(in_use("0.0.0.0", 9000, "TCP"), listeners) == "move it with --admin-listen"
    assert flag_hint(in_use("0.0.0.0", 8080, "UDP"), listeners) == "move it with --gossip-listen"
    # A port no flag asked for (an ephemeral one that raced): every flag of that transport.
    assert flag_hint(in_use("0.0.0.0", 1234, "TCP"), listeners) == (
        "move it with --listen or --admin-listen")


def test_asyncio_words_for_a_failed_bind_are_understood() -> None:
    raw = OSError(errno.EADDRINUSE, "error while attempting to bind on address "
                  "('127.0.0.1', 8080): address already in use")
    found = as_bind_error(raw)
    assert found is not None
    assert (found.host, found.port, found.transport) == ("127.0.0.1", 8080, "TCP")
    assert as_bind_error(OSError(errno.ENOENT, "no such file")) is None


def test_a_wireguard_port_held_on_ipv6_alone_is_taken(tmp_path: Path) -> None:
    # wireguard-go listens on IPv4 and IPv6: a port free for IPv4 but held on [::] is one
    # its worker could not start on, so it is not kept, however well remembered.
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as held:
        held.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        held.bind(("::", 0))
        port = int(held.getsockname()[1])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as ipv4:
            ipv4.bind(("0.0.0.0", port))  # an IPv4 socket alone fits
        remember(tmp_path, RememberedPorts(wireguard={"ams-1": port}))
        plan = choose_wireguard(tmp_path, ["ams-1"], None, PortClaims(lock_dir=None))
        assert plan.ports["ams-1"] != port
        assert plan.moved == {"ams-1": (port, plan.ports["ams-1"])}
        assert udp_taken(EVERY_ADDRESS, port) is not None
    assert udp_taken(EVERY_ADDRESS, port) is None  # free on both once let go
