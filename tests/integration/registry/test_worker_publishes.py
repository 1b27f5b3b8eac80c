"""A real worker process publishes its capacity and machines into a node that joined it."""

from __future__ import annotations

import datetime
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bodega.wire.internal.worker_client import WorkerClient
from tests.integration.daemon_kit import Daemon, worker_daemon
from tests.integration.registry.node_kit import Nodes, until
from tests.keyring_kit import KEYRING
from tests.tls_kit import TEST_CA

MACHINE = {"app": "web", "config": {"image": "nginx", "guest": {
    "cpu_kind": "shared", "cpus": 1, "memory_mb": 256}}}


@pytest.fixture
async def worker(tmp_path: Path) -> AsyncIterator[tuple[Daemon, WorkerClient]]:
    daemon = await worker_daemon(tmp_path).start()
    client = WorkerClient(daemon.url, TEST_CA.context("broker"))
    yield daemon, client
    await client.aclose()
    await daemon.stop()


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[Nodes]:
    group = Nodes(tmp_path / "nodes")
    yield group
    await group.stop_all()


async def test_the_worker_row_and_machine_rows_reach_a_node_that_joined_it(
        worker: tuple[Daemon, WorkerClient], nodes: Nodes) -> None:
    daemon, client = worker
    ready = json.loads(daemon.ready_file.read_text())
    assert ready["gossip"].startswith("127.0.0.1:")
    node = (await nodes.start("broker-1", role="broker", seeds=(ready["gossip"],))).node
    await until(lambda: node.get("workers", "w1") is not None)
    row = node.get("workers", "w1")
    assert row is not None
    assert (row["url"], row["driver"], row["cordoned"], row["machines"]) == (
        daemon.url, "null", False, 0)
    assert row["free"]["memory_mb"] == 4096
    member = node.membership.member("w1")
    assert member is not None
    assert member.meta.keys() == {"url", "sync", "cert_expires", "keys"}
    assert member.meta["url"] == daemon.url
    assert member.meta["keys"] == KEYRING.report()
    expires = datetime.datetime.fromisoformat(member.meta["cert_expires"])
    assert expires > datetime.datetime.now(datetime.UTC)  # the worker's certificate's end

    created = await client.create_machine(MACHINE)
    machine_id = created.id
    await client.wait(machine_id, "started", timeout=10)

    def machine_state() -> str | None:
        doc = node.get("machines", machine_id)
        return None if doc is None else str(doc["state"])

    await until(lambda: machine_state() == "started")
    doc = node.get("machines", machine_id)
    assert doc is not None
    assert (doc["worker"], doc["app"], doc["config"]["image"]) == ("w1", "web", "nginx")
    assert "events" not in doc
    await until(lambda: (node.get("workers", "w1") or {}).get("machines") == 1)
    used = node.get("workers", "w1")
    assert used is not None
    assert used["free"]["memory_mb"] == 4096 - 256

    await client.cordon(True)
    await until(lambda: [w["name"] for w in node.rows("workers", cordoned=True)] == ["w1"])
    await client.destroy(machine_id, force=True)
    await until(lambda: machine_state() == "destroyed")  # listed with include_deleted
    await until(lambda: (node.get("workers", "w1") or {}).get("machines") == 0)


async def test_a_restarted_worker_republishes_and_rejoins(
        worker: tuple[Daemon, WorkerClient], nodes: Nodes, tmp_path: Path) -> None:
    daemon, client = worker
    gossip = json.loads(daemon.ready_file.read_text())["gossip"]
    first = await nodes.start("broker-1", role="broker", seeds=(gossip,))
    await until(lambda: first.node.get("workers", "w1") is not None)
    await daemon.kill9()
    await client.aclose()
    # back on its data dir, joining through the node it knew: a new HTTP port to publish
    again = worker_daemon(tmp_path)
    again.argv += ["--join", first.seed]
    await again.start()
    try:
        await until(lambda: (first.node.get("workers", "w1") or {}).get("url") == again.url)
    finally:
        await again.stop()
