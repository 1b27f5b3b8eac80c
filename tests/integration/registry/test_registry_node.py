"""Real registry nodes on loopback: gossip over UDP, sync and subscriptions over HTTP."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bodega.registry import RegistryNode, RowChange, subscribe_http
from tests.integration.registry.node_kit import Nodes, until
from tests.tls_kit import TEST_CA


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[Nodes]:
    group = Nodes(tmp_path)
    yield group
    await group.stop_all()


def worker_doc(name: str, **extra: object) -> dict[str, Any]:
    return {"name": name, "region": "ams", "url": f"http://{name}", "cordoned": False, **extra}


def everyone_has(nodes: list[RegistryNode], table: str, key: str,
                 doc: dict[str, Any] | None) -> bool:
    return all(n.get(table, key) == doc for n in nodes)


async def test_a_write_on_one_node_is_read_on_all(nodes: Nodes) -> None:
    first = await nodes.start("w1")
    for i in range(2, 6):
        await nodes.start(f"w{i}", seeds=(first.seed,))
    everyone = nodes.nodes()
    await until(lambda: all(len(n.membership.alive()) == 5 for n in everyone))
    doc = worker_doc("w3", cordoned=True)
    nodes.running["w3"].node.put_owned("workers", "w3", doc)
    await until(lambda: everyone_has(everyone, "workers", "w3", doc))
    assert [d["name"] for d in everyone[0].rows("workers", cordoned=True)] == ["w3"]
    assert everyone[4].rows("workers", cordoned=False) == []
    # A row too large for a packet, even compressed, travels by sync instead.
    noise = base64.b64encode(os.urandom(3000)).decode()
    app = {"name": "web", "org_slug": "personal", "blob": noise}
    everyone[1].put_shared("apps", "web", app)
    await until(lambda: everyone_has(everyone, "apps", "web", app))
    everyone[2].delete_shared("apps", "web")
    await until(lambda: everyone_has(everyone, "apps", "web", None))
    notices = everyone[1].metrics.registry.get_sample_value(
        "bodega_registry_items_sent_total", {"form": "notice"})
    assert notices == 1


async def test_a_killed_node_restarted_on_its_data_dir_converges(nodes: Nodes) -> None:
    first = await nodes.start("w1")
    await nodes.start("w2", seeds=(first.seed,))
    await nodes.start("w3", seeds=(first.seed,))
    w3 = nodes.running["w3"].node
    w3.put_owned("workers", "w3", worker_doc("w3"))
    await until(lambda: everyone_has(nodes.nodes(), "workers", "w3", worker_doc("w3")))
    counter = w3.replica.counter
    await nodes.stop("w3", leave=False)  # a crash, as far as the others can tell
    w1, w2 = nodes.running["w1"].node, nodes.running["w2"].node
    w1.put_owned("workers", "w1", worker_doc("w1", epoch=2))
    w2.put_shared("apps", "api", {"name": "api", "org_slug": "acme"})
    restarted = (await nodes.start("w3", seeds=(first.seed,))).node
    assert restarted.replica.counter == counter  # it continues above its last version
    assert restarted.get("workers", "w3") == worker_doc("w3")  # its view survived
    await until(lambda: restarted.get("workers", "w1") == worker_doc("w1", epoch=2)
                and restarted.get("apps", "api") is not None)
    restarted.put_owned("workers", "w3", worker_doc("w3", epoch=2))
    await until(lambda: everyone_has(nodes.nodes(), "workers", "w3", worker_doc("w3", epoch=2)))


async def test_a_subscription_over_http_streams_rows_then_changes(nodes: Nodes) -> None:
    first = await nodes.start("w1")
    second = await nodes.start("w2", seeds=(first.seed,))
    machine = {"id": "m1", "app": "web", "name": "m1", "region": "ams", "worker": "w1",
               "state": "started"}
    first.node.put_owned("machines", "m1", machine)
    first.node.put_owned("machines", "m2", {**machine, "id": "m2", "app": "other"})
    await until(lambda: second.node.get("machines", "m2") is not None)
    stream = subscribe_http(second.url, TEST_CA.context("admin"), "machines", app="web")
    seen: list[RowChange] = []
    async for change in stream:
        seen.append(change)
        if change.kind == "initial":
            first.node.put_owned("machines", "m1", {**machine, "state": "stopped"})
            first.node.delete_owned("machines", "m2")  # not in the query: never shown
            first.node.put_owned("machines", "m3", {**machine, "id": "m3"})
        if len(seen) == 3:
            break
    await stream.aclose()
    assert [(c.kind, c.key) for c in seen] == [("initial", "m1"), ("update", "m1"),
                                               ("insert", "m3")]
    assert seen[1].doc is not None
    assert seen[1].doc["state"] == "stopped"


async def test_the_registry_routes_need_a_members_certificate(nodes: Nodes) -> None:
    first = await nodes.start("w1")
    paths = ("/v1/registry/sync", "/v1/registry/digest", "/v1/registry/subscriptions")
    async with httpx.AsyncClient(base_url=first.url, verify=TEST_CA.anonymous()) as http:
        for path in paths:  # no certificate: refused in the handshake, nothing answered
            with pytest.raises(httpx.TransportError):
                await http.post(path, json={})
    async with TEST_CA.http("admin", base_url=first.url) as http:  # the operator: read only
        for path in paths[:2]:
            response = await http.post(path, json={})
            assert response.status_code == 403, response.text
            assert response.json()["status"] == "permission_denied"
    async with TEST_CA.http("worker", base_url=first.url) as http:
        auth: dict[str, str] = {}
        response = await http.post("/v1/registry/sync", json={"from": 1}, headers=auth)
        assert response.status_code == 400
        response = await http.post("/v1/registry/digest", json={"from": "x", "digest": "AAAA"},
                                   headers=auth)
        assert response.status_code == 400
        assert response.json()["status"] == "invalid_argument"
        assert "digest" in response.json()["error"]
        response = await http.post("/v1/registry/subscriptions", headers=auth,
                                   json={"table": "machines", "where": {"nope": 1}})
        assert response.status_code == 400
        assert "filtered on" in response.json()["error"]


async def test_a_node_whose_disk_filled_catches_up_by_sync_once_there_is_room(
        nodes: Nodes) -> None:
    first = await nodes.start("w1")
    second = (await nodes.start("w2", seeds=(first.seed,))).node
    await until(lambda: len(second.membership.alive()) == 2)
    db = second.replica.view.db
    # No page more than it has: SQLite answers SQLITE_FULL, as on a full disk.
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    docs = {f"app{i}": {"name": f"app{i}", "org_slug": "personal", "pad": "x" * 300}
            for i in range(40)}
    for key, doc in docs.items():
        first.node.put_shared("apps", key, doc)
    refused = 0.0

    def sync_refused() -> bool:
        nonlocal refused
        refused = second.metrics.registry.get_sample_value(
            "bodega_registry_syncs_total", {"result": "error"}) or 0.0
        return refused >= 2  # the sync loop lived through a refusal and pulled again

    await until(sync_refused)
    assert not everyone_has([second], "apps", "app39", docs["app39"])
    await asyncio.sleep(2.0)  # the gossip of those rows has run its course: only sync repairs
    db.execute("PRAGMA max_page_count = 1073741823")
    await until(lambda: all(everyone_has([second], "apps", k, d) for k, d in docs.items()))
