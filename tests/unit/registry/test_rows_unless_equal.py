"""Rows that differ from a value (``rows(table, without, ...)``): the view in SQL and the
broker's in-memory fake leave out the same rows."""

from __future__ import annotations

from typing import Any

import pytest

from bodega.broker.catalog import MemoryCatalog
from tests.unit.registry.row_kit import machine_doc, replica

DOCS: dict[str, dict[str, Any]] = {
    "m1": machine_doc("m1", "w1", "started"),
    "m2": machine_doc("m2", "w1", "destroyed"),
    "m3": machine_doc("m3", "w1", "stopped"),
    "m4": machine_doc("m4", "w1", "stopped", app="api"),
    "m5": machine_doc("m5", "w1", "destroyed", app="api"),
}


def test_unless_leaves_out_the_rows_equal_to_it_in_the_view_and_in_the_fake() -> None:
    r = replica("w1")
    fake = MemoryCatalog()
    for key, doc in DOCS.items():
        r.write("machines", key, doc, shared=False)
        fake.put("machines", key, doc)
    r.write("machines", "m1", None, shared=False)  # a tombstone is never selected
    fake.delete("machines", "m1")

    def keys(filters: dict[str, str], unless: dict[str, str] | None) -> dict[str, list[str]]:
        view = [row.key for row in r.view.select("machines", filters, unless=unless)]
        memory = sorted(doc["id"] for doc in fake.rows("machines", unless, **filters))
        return {"view": view, "fake": memory}

    unless = {"state": "destroyed"}
    assert keys({"app": "web"}, unless) == {"view": ["m3"], "fake": ["m3"]}
    assert keys({}, unless) == {"view": ["m3", "m4"], "fake": ["m3", "m4"]}
    assert keys({"app": "web"}, None) == {"view": ["m2", "m3"], "fake": ["m2", "m3"]}
    with pytest.raises(ValueError, match="filtered on"):
        r.view.select("machines", {}, unless={"config": "x"})
    with pytest.raises(ValueError, match="not an indexed column"):
        fake.rows("machines", {"config": "x"})
