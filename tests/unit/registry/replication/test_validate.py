"""Rows from peers are checked before they are applied; a bad one is counted, never fatal."""

from __future__ import annotations

from typing import Any

import pytest

from bodega.registry.replication.core.hlc import Stamp
from bodega.registry.replication.core.rows import Row
from bodega.registry.replication.core.validate import MAX_DOC_BYTES, problem
from bodega.registry.replication.writes import InvalidRow
from tests.unit.registry.replication.row_kit import (
    app_doc,
    machine_doc,
    metrics,
    rejected,
    replica,
    row,
    worker_doc,
)

GOOD_MACHINE = machine_doc("m1", "w1")


@pytest.mark.parametrize(("bad", "reason"), [
    (row("nope", "k", {}, "w1", 1), "table"),
    (row("machines", "", GOOD_MACHINE, "w1", 1), "key"),
    (row("machines", "x" * 201, GOOD_MACHINE, "w1", 1), "key"),
    (row("machines", "m1", GOOD_MACHINE, "w1", 0), "version"),
    (row("machines", "m1", {**GOOD_MACHINE, "state": 7}, "w1", 1), "field:state"),
    (row("machines", "m1", {k: v for k, v in GOOD_MACHINE.items() if k != "app"}, "w1", 1),
     "field:app"),
    (row("machines", "m1", {**GOOD_MACHINE, "id": "m2"}, "w1", 1), "key"),
    (row("machines", "m1", GOOD_MACHINE, "w2", 1), "owner"),  # says worker w1, sent as w2's
    (row("machines", "m1", {**GOOD_MACHINE, "blob": "x" * MAX_DOC_BYTES}, "w1", 1), "size"),
    (row("workers", "w1", worker_doc("w1"), "w2", 1), "owner"),
    (row("workers", "w1", worker_doc("w1", cordoned="no"), "w1", 1), "field:cordoned"),
    (row("workers", "w1", None, "w2", 1), "owner"),  # a tombstone still names its owner
    (row("images", "w1/nginx", {"worker": "w1", "ref": "redis"}, "w1", 1), "key"),
    (row("images", "nginx", {"worker": "w1", "ref": "nginx"}, "w1", 1), "owner"),
    (row("releases", "r1", {"app": "web", "version": "2"}, "w1", 1), "field:version"),
    (row("releases", "r1", {"app": "web", "version": True}, "w1", 1), "field:version"),
    (row("tokens", "t1", {"token_hash": "h"}, "w1", 1), "field:scope"),
    (Row("apps", "a", app_doc("a"), "w1", 1, Stamp(1, 0, "w2")), "stamp"),
])
def test_bad_rows_are_named(bad: Row, reason: str) -> None:
    assert problem(bad) == reason


@pytest.mark.parametrize("good", [
    row("machines", "m1", GOOD_MACHINE, "w1", 1),
    row("machines", "m1", None, "w9", 3),  # a tombstone cannot tell its owner: accepted
    row("volumes", "v1", {"id": "v1", "app": "a", "name": "d", "region": "ams", "worker": "w1",
                          "state": "created", "attached_machine_id": None}, "w1", 1),
    row("images", "w1/nginx:1", {"worker": "w1", "ref": "nginx:1"}, "w1", 1),
    row("releases", "r1", {"app": "web", "version": 3}, "b1", 1),
    row("workers", "w1", worker_doc("w1", cordoned=True, extra={"any": ["thing"]}), "w1", 1),
])
def test_good_rows_pass(good: Row) -> None:
    assert problem(good) is None


def test_apply_refuses_bad_rows_counts_them_and_applies_the_rest() -> None:
    m = metrics()
    r = replica("me", metrics=m)
    bad_state: dict[str, Any] = {**GOOD_MACHINE, "state": None}
    changes = r.apply([
        row("machines", "m1", bad_state, "w1", 1),
        row("machines", "m2", machine_doc("m2", "w1"), "w1", 2),
        row("nope", "k", {}, "w1", 3),
        row("apps", "a", app_doc("a"), "w1", 4, wall_ms=(2**50)),  # absurdly far ahead
    ])
    assert [c.new.key for c in changes if c.new] == ["m2"]
    assert rejected(m, "machines", "field:state") == 1
    assert rejected(m, "unknown", "table") == 1
    assert rejected(m, "apps", "clock") == 1
    assert r.view.get("machines", "m1") is None
    # refused versions are not marked seen: a sync that vouches for them will settle it
    assert 1 not in r.known()["w1"]
    assert 2 in r.known()["w1"]


def test_an_owned_key_never_changes_owner() -> None:
    m = metrics()
    r = replica("me", metrics=m)
    r.apply([row("machines", "m1", machine_doc("m1", "w1"), "w1", 1)])
    r.apply([row("machines", "m1", machine_doc("m1", "w2"), "w2", 50)])
    held = r.view.get("machines", "m1")
    assert held is not None
    assert held.owner == "w1"
    assert rejected(m, "machines", "owner") == 1


def test_local_writes_that_break_the_rules_raise() -> None:
    r = replica("w1")
    with pytest.raises(InvalidRow):
        r.write("machines", "m1", {**GOOD_MACHINE, "state": 3}, shared=False)
    with pytest.raises(InvalidRow):
        r.write("machines", "m1", machine_doc("m1", "someone-else"), shared=False)
    with pytest.raises(ValueError, match="shared table"):
        r.write("apps", "a", app_doc("a"), shared=False)
    with pytest.raises(ValueError, match="owned table"):
        r.write("workers", "w1", worker_doc("w1"), shared=True)
    assert r.view.all_rows() == []
