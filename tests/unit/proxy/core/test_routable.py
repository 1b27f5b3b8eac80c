"""The routable predicate both data planes use: started, not cordoned, service checks passing."""

from __future__ import annotations

from typing import Any

from bodega.model.machine import Machine
from bodega.proxy.core.balance import usable
from bodega.proxy.core.routes import Backend, RoutingTable, service_checks


def doc(checks: list[dict[str, Any]] | None, *, with_checks: bool = True,
        state: str = "started", updated_at: str = "2026-11-24T10:00:00Z") -> Machine:
    service: dict[str, Any] = {"internal_port": 8080, "protocol": "tcp",
                               "ports": [{"port": 80, "handlers": ["http"]}]}
    if with_checks:
        service["checks"] = [{"type": "http", "path": "/healthz"}]
    out: dict[str, Any] = {"id": "m1", "app": "web", "region": "ams", "worker": "w1",
                           "state": state, "private_ip": "10.0.0.2", "updated_at": updated_at,
                           "config": {"image": "x", "services": [service]}}
    if checks is not None:
        out["checks"] = checks
    return Machine.model_validate(out)


def check(status: str, name: str = "servicecheck-00-http-8080") -> dict[str, Any]:
    return {"name": name, "status": status, "output": "", "updated_at": "t"}


def routable(d: Machine) -> bool:
    backend = Backend.from_machine(d)
    assert backend is not None
    return usable(backend, lambda _w: True)


def test_a_machine_without_service_checks_is_routable_once_started() -> None:
    assert service_checks(doc(None, with_checks=False)) == "passing"
    assert routable(doc(None, with_checks=False))


def test_service_checks_must_all_pass_and_top_level_checks_do_not_count() -> None:
    assert routable(doc([check("passing"), check("critical", name="db")]))
    assert not routable(doc([check("passing"), check("critical", "servicecheck-01-tcp-80")]))
    assert service_checks(doc([check("critical")])) == "failing"


def test_a_machine_waiting_for_its_first_check_is_not_routed() -> None:
    assert service_checks(doc([check("warning")])) == "waiting"
    assert not routable(doc([check("warning")]))
    assert not routable(doc(None))  # a row from before checks were reported


def test_the_proxy_trusts_a_machine_it_woke_until_a_check_fails() -> None:
    table = RoutingTable()
    table.put_machine("m1", doc([check("warning")], state="stopped"))
    table.mark_started("m1")
    table.put_machine("m1", doc([check("warning")]))
    woken = table.get("m1")
    assert woken is not None
    assert usable(woken, lambda _w: True)
    table.put_machine("m1", doc([check("critical")]))
    failed = table.get("m1")
    assert failed is not None
    assert not usable(failed, lambda _w: True)


def test_a_machine_the_proxy_put_to_rest_is_not_routed_before_its_row_says_so() -> None:
    # Autostop suspended it: a request must wake it, not wait on its frozen process.
    table = RoutingTable()
    table.put_machine("m1", doc([check("passing")]))
    table.mark_rested("m1", "suspended")
    rested = table.get("m1")
    assert rested is not None
    assert rested.state == "suspended"
    assert not usable(rested, lambda _w: True)
    table.put_machine("m1", doc([check("passing")], updated_at="2026-11-24T10:00:01Z"))
    again = table.get("m1")  # a row written since: it runs again
    assert again is not None
    assert usable(again, lambda _w: True)


def test_a_row_from_before_the_proxy_stopped_a_machine_does_not_bring_it_back() -> None:
    # The row a check's change published just before autostop stopped the machine arrives
    # after: believed, the machine would be routed to, and stopped (and counted) again.
    table = RoutingTable()
    table.put_machine("m1", doc([check("warning")]))
    table.mark_rested("m1", "stopped")
    table.put_machine("m1", doc([check("passing")]))  # same updated_at: older news
    rested = table.get("m1")
    assert rested is not None
    assert rested.state == "stopped"
    assert not usable(rested, lambda _w: True)
    table.put_machine("m1", doc([check("passing")], state="stopping",
                                updated_at="2026-11-24T10:00:02Z"))
    newer = table.get("m1")
    assert newer is not None
    assert newer.state == "stopping"
    table.put_machine("m1", doc([check("passing")], updated_at="2026-11-24T10:00:09Z"))
    started = table.get("m1")  # started again since (by a deploy, say): believed
    assert started is not None
    assert usable(started, lambda _w: True)
