"""Rows that differ from a value (``rows(table, without, ...)``): the broker's catalog over a
registry node (the view in SQL) and its in-memory fake leave out the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from bodega.broker.view.catalog import Catalog, MemoryCatalog
from bodega.broker.view.registry_catalog import RegistryCatalog
from bodega.registry import RegistryConfig, RegistryNode
from tests.keyring_kit import KEYRING
from tests.unit.registry.replication.row_kit import machine_doc

DOCS: dict[str, dict[str, Any]] = {
    "m1": machine_doc("m1", "w1", "started"),
    "m2": machine_doc("m2", "w1", "destroyed"),
    "m3": machine_doc("m3", "w1", "stopped"),
    "m4": machine_doc("m4", "w1", "stopped", app="api"),
    "m5": machine_doc("m5", "w1", "destroyed", app="api"),
}


def keys(catalog: Catalog, without: dict[str, str] | None, **filters: str) -> list[str]:
    return sorted(doc["id"] for doc in catalog.rows("machines", without, **filters))


def test_without_leaves_out_the_rows_equal_to_it_in_the_view_and_in_the_fake(
        tmp_path: Path) -> None:
    node = RegistryNode(RegistryConfig(name="w1", role="worker", region="ams",
                                       data_dir=tmp_path / "registry", keyring=KEYRING),
                        registry=CollectorRegistry())
    fake = MemoryCatalog()
    try:
        for key, doc in DOCS.items():
            node.put_owned("machines", key, doc)  # a node reads and writes before start
            fake.put("machines", key, doc)
        node.delete_owned("machines", "m1")  # a tombstone is never listed
        fake.delete("machines", "m1")
        destroyed = {"state": "destroyed"}
        for catalog in (RegistryCatalog(node), fake):
            assert keys(catalog, destroyed, app="web") == ["m3"]
            assert keys(catalog, destroyed) == ["m3", "m4"]
            assert keys(catalog, None, app="web") == ["m2", "m3"]
            assert keys(catalog, {"state": "stopped"}, app="api") == ["m5"]
        with pytest.raises(ValueError, match="filtered on"):
            node.rows("machines", {"config": "x"})
        with pytest.raises(ValueError, match="not an indexed column"):
            fake.rows("machines", {"config": "x"})
    finally:
        node.view.close()
