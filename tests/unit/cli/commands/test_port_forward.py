"""`bodega port-forward`'s choices: the ports it is given, the machine it forwards to, and the
lines it says."""

from __future__ import annotations

import pytest

from bodega.cli.commands.port_forward import (
    Ports,
    address,
    check_named,
    choose_machine,
    failed_line,
    parse_ports,
    proxying_line,
)
from bodega.model.machine import Machine


@pytest.mark.parametrize(("given", "ports"), [
    ("5432", Ports(5432, 5432)), ("15432:5432", Ports(15432, 5432)),
    ("0:5432", Ports(0, 5432)), (" 22:2222 ", Ports(22, 2222)), ("65535:1", Ports(65535, 1)),
])
def test_local_and_remote_ports(given: str, ports: Ports) -> None:
    assert parse_ports(given) == ports


@pytest.mark.parametrize("given", ["", "0", "x", "5432:", ":5432", "1:0", "65536",
                                   "1:65536", "1:2:3", "-1:5", "54 32", "٣:1"])
def test_anything_else_is_refused_in_one_line_saying_what_it_takes(given: str) -> None:
    with pytest.raises(ValueError, match=r"port-forward takes LOCAL or LOCAL:REMOTE") as err:
        parse_ports(given)
    assert repr(given) in str(err.value)
    assert "\n" not in str(err.value)


def machine(id: str, state: str, created_at: str = "2025-01-01T00:00:00Z",
            private_ip: str = "") -> Machine:
    return Machine(id=id, state=state, created_at=created_at, private_ip=private_ip)


def test_without_machine_the_oldest_started_one_is_chosen() -> None:
    machines = [machine("m3", "started", "2025-01-03T00:00:00Z"),
                machine("m1", "stopped", "2025-01-01T00:00:00Z"),
                machine("m2", "started", "2025-01-02T00:00:00Z")]
    assert choose_machine(machines, "db").id == "m2"


def test_an_app_with_no_started_machine_is_said_with_what_it_has() -> None:
    with pytest.raises(ValueError, match="app db has no started machine") as err:
        choose_machine([machine("m1", "stopped"), machine("m2", "suspended")], "db")
    assert "its machines: stopped, suspended" in str(err.value)
    assert "--machine" in str(err.value)
    with pytest.raises(ValueError, match=r"\(its machines: none\)"):
        choose_machine([], "db")


def test_a_named_machine_may_be_stopped_but_not_destroyed() -> None:
    stopped = machine("m1", "stopped")
    assert check_named(stopped) is stopped
    with pytest.raises(ValueError, match="machine m1 is destroyed"):
        check_named(machine("m1", "destroyed"))


def test_the_lines_said() -> None:
    db = machine("m1", "started", private_ip="fdaa:0:1::2")
    assert proxying_line(address("127.0.0.1", 5432), db, 5432, "db") == (
        "Proxying 127.0.0.1:5432 to machine m1 (fdaa:0:1::2) port 5432 of app db")
    assert proxying_line(address("::1", 15432), machine("m2", "started"), 5432, "db") == (
        "Proxying [::1]:15432 to machine m2 port 5432 of app db")
    assert failed_line("127.0.0.1:40000", "machine m1 is stopped, not started") == (
        "connection from 127.0.0.1:40000 closed: machine m1 is stopped, not started")
