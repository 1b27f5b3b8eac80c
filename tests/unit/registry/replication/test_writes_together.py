"""A registry node's writes made together: one transaction, read back inside, told after."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from bodega.registry import RegistryConfig, RegistryNode
from tests.keyring_kit import KEYRING


@pytest.fixture
def node(tmp_path: Path) -> Iterator[RegistryNode]:
    made = RegistryNode(RegistryConfig(name="w1", role="worker", region="ams",
                                       data_dir=tmp_path / "registry", keyring=KEYRING),
                        registry=CollectorRegistry())
    yield made
    made.view.close()


def machine(state: str) -> dict[str, object]:
    return {"id": "m1", "app": "web", "name": "m1", "region": "ams", "worker": "w1",
            "state": state}


async def test_a_key_written_twice_reads_back_inside_and_is_told_after_the_commit(
        node: RegistryNode) -> None:
    statements: list[str] = []
    node.view.db.set_trace_callback(statements.append)
    started = node.subscribe("machines", app="web", state="started")
    told: list[set[str]] = []
    node.table_listeners.append(told.append)
    with node.writes_together():
        node.put_owned("machines", "m1", machine("started"))
        assert node.get("machines", "m1") == machine("started")
        node.put_owned("machines", "m1", machine("stopped"))
        with node.writes_together():  # inside another: part of its batch
            node.put_owned("machines", "m2", {**machine("stopped"), "id": "m2", "name": "m2"})
        assert "COMMIT" not in statements
        assert told == []  # nothing is told before the commit
    assert statements.count("COMMIT") == 1
    assert told == [{"machines"}]  # once, of the whole batch
    seen = [await asyncio.wait_for(anext(started), 1) for _ in range(2)]
    assert [(c.kind, c.key) for c in seen] == [("insert", "m1"), ("delete", "m1")]


def test_a_batch_that_writes_nothing_begins_no_transaction(node: RegistryNode) -> None:
    node.put_owned("machines", "m1", machine("started"))
    statements: list[str] = []
    node.view.db.set_trace_callback(statements.append)
    with node.writes_together():
        node.put_owned("machines", "m1", machine("started"))  # unchanged: no write
    assert statements == [s for s in statements if not s.startswith(("BEGIN", "COMMIT"))]
