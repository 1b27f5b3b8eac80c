"""`bodega status` and `bodega machine list`: a machine on an unreachable host says so,
and a standby started beside its started primary is a warning line."""

from __future__ import annotations

from typing import Any

from bodega.cli.commands.core.standby_pairs import both_started, state_label
from bodega.model.machine import Machine


def machine(mid: str, state: str, host: str = "ok",
            standbys: list[str] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"image": "x"}
    if standbys:
        config["standbys"] = standbys
    return {"id": mid, "state": state, "host_status": host, "config": config}


def read(*docs: dict[str, Any]) -> list[Machine]:
    """The machines as the client reads them off the wire."""
    return [Machine.model_validate(doc) for doc in docs]


def test_a_machine_on_an_unreachable_host_says_so() -> None:
    (unreachable,) = read(machine("p1", "started", "unreachable"))
    assert state_label(unreachable) == "started (host unreachable)"
    assert state_label(*read(machine("p1", "started"))) == "started"
    assert state_label(*read({"state": "stopped"})) == "stopped"  # an answer without the field


def test_a_standby_started_beside_its_started_primary_is_a_warning() -> None:
    got = both_started(read(machine("p1", "started"), machine("s1", "started", standbys=["p1"])))
    assert got == ["Warning: p1 and its standby s1 are both started: two copies run"]


def test_the_warning_says_which_host_is_unreachable() -> None:
    (got,) = both_started(read(machine("p1", "started", "unreachable"),
                               machine("s1", "started", standbys=["p1"])))
    assert "p1's host is unreachable; it may still be running there" in got
    # GET answers for an unreachable host carry incomplete_config instead of config.
    standby = machine("s1", "started", "unreachable", standbys=["p1"])
    standby["incomplete_config"] = standby.pop("config")
    (got,) = both_started(read(machine("p1", "started"), standby))
    assert got.endswith("(s1's host is unreachable)")


def test_one_copy_running_is_no_warning() -> None:
    assert both_started(read(machine("p1", "started"),
                             machine("s1", "stopped", standbys=["p1"]))) == []
    assert both_started(read(machine("p1", "stopped"),
                             machine("s1", "started", standbys=["p1"]))) == []
    assert both_started(read(machine("s1", "started", standbys=["p1"]))) == []  # p1 gone
    assert both_started(read(machine("p1", "started"), machine("p2", "started"))) == []
