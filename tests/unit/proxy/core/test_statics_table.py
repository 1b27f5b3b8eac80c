"""The statics table: which machines' workers serve an app's static files, and its prefixes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bodega.model.machine import Machine
from bodega.model.statics import Refuse, Serve
from bodega.proxy.core.statics import StaticsTable
from bodega.proxy.haproxy.core.config import HaproxySettings, render
from bodega.proxy.haproxy.core.edge import static_prefixes
from bodega.proxy.haproxy.core.layout import EMPTY

PUBLIC = {"guest_path": "/app/public", "url_prefix": "/static"}


def machine(mid: str, *, state: str = "stopped", worker: str = "w1", app: str = "web",
            image: str = "registry.example/web:1", updated_at: str = "1",
            statics: list[dict[str, Any]] | None = None) -> Machine:
    return Machine.model_validate({
        "id": mid, "app": app, "region": "ams", "worker": worker, "state": state,
        "updated_at": updated_at,
        "config": {"image": image, "statics": [PUBLIC] if statics is None else statics}})


def test_a_path_under_a_prefix_is_served_by_any_machines_worker_started_first() -> None:
    table = StaticsTable()
    table.put_machine("m1", machine("m1", worker="w1"))
    table.put_machine("m2", machine("m2", worker="w2", state="started"))
    table.put_machine("m3", machine("m3", worker="w2"))  # w2 is asked once
    found = table.lookup("web", "/static/a.css")
    assert found is not None
    assert found.found == Serve("/app/public/a.css", None, "/static")
    assert [s.machine_id for s in found.sources] == ["m2", "m1"]
    assert table.lookup("web", "/other") is None  # the machines'
    assert table.lookup("api", "/static/a.css") is None
    refused = table.lookup("web", "/static/../x")
    assert refused is not None
    assert isinstance(refused.found, Refuse)


def test_a_dead_workers_machines_are_not_asked() -> None:
    table = StaticsTable()
    table.put_machine("m1", machine("m1", worker="w1"))
    table.put_machine("m2", machine("m2", worker="w2"))
    found = table.lookup("web", "/static/a.css", lambda worker: worker != "w1")
    assert found is not None
    assert [s.machine_id for s in found.sources] == ["m2"]


def test_a_process_machine_a_tigris_bucket_and_a_destroyed_machine_serve_nothing() -> None:
    table = StaticsTable()
    table.put_machine("p", machine("p", image="process"))
    table.put_machine("b", machine("b", statics=[{**PUBLIC, "tigris_bucket": "assets"}]))
    table.put_machine("d", machine("d", state="destroyed"))
    assert table.prefixes() == {}
    assert table.lookup("web", "/static/a.css") is None


def test_the_newest_machines_statics_decide_during_a_deploy_and_changes_are_told() -> None:
    table = StaticsTable()
    told: list[int] = []
    table.on_change(lambda: told.append(1))
    table.put_machine("old", machine("old", updated_at="1"))
    assert (table.prefixes(), len(told)) == ({"web": frozenset({"/static"})}, 1)
    table.put_machine("old", machine("old", updated_at="2", state="started"))
    assert len(told) == 1  # a state change moves no prefix
    new = [{"guest_path": "/srv/assets", "url_prefix": "/assets"}]
    table.put_machine("new", machine("new", updated_at="3", statics=new))
    assert (table.prefixes(), len(told)) == ({"web": frozenset({"/assets"})}, 2)
    found = table.lookup("web", "/assets/x.js")
    assert found is not None
    assert [s.machine_id for s in found.sources] == ["new"]  # the old one has other statics
    assert table.lookup("web", "/static/x.css") is None
    table.put_machine("new", None)
    table.put_machine("old", None)
    assert (table.prefixes(), len(told)) == ({}, 4)


def test_haproxy_sends_a_get_under_a_static_prefix_to_the_activator() -> None:
    entries = static_prefixes({"web": frozenset({"/static/", "/"}), "gone": frozenset({"/x"})},
                              {"web": "web.localhost"})
    assert entries == {"web.localhost/static": "web", "web.localhost": "web"}
    settings = HaproxySettings("127.0.0.1", 80, "127.0.0.1", 81, Path("/run/admin.sock"),
                               Path("/run/hosts.map"))
    text = render(EMPTY, settings)
    assert ("    http-request set-var(txn.static) var(txn.site),concat(,txn.path,),"
            "map_beg(/run/statics.map) if METH_GET") in text
    rules = [line.strip() for line in text.splitlines() if line.strip().startswith("use_backend")]
    assert rules[0] == "use_backend activator if { var(txn.static) -m found }"  # before any
