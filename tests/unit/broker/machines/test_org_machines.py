"""Listing an org's machines: filters, order, the cursor, and bad parameters."""

from __future__ import annotations

import ipaddress
import random

import pytest

from bodega.broker.apps.ip_assignments import SHARED_V4, V4_POOL, allocate
from bodega.broker.machines.core.org_list import decode_cursor, encode_cursor, page, parse_query
from bodega.broker.view.core.freshness import stamp
from bodega.model.errors import BadRequest, Unavailable
from bodega.model.machine import Machine

GUEST = {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256}


def doc(mid: str, updated: str, state: str = "started", region: str = "ams",
        app: str = "a") -> Machine:
    return Machine.model_validate({
        "id": mid, "app": app, "name": mid, "state": state, "region": region,
        "updated_at": updated, "config": {"image": "i", "guest": GUEST,
                                          "env": {"SECRET": "x"}}})


DOCS = [doc("m3", "2026-01-01T00:00:03Z"), doc("m1", "2026-01-01T00:00:01Z"),
        doc("m2", "2026-01-01T00:00:01.5Z", "destroyed"),
        doc("m4", "2026-01-01T00:00:04Z", "stopped", "syd", "b")]


def test_oldest_update_first_without_destroyed_and_with_an_overview_config() -> None:
    body = page(DOCS, parse_query({})).doc()
    assert [m["id"] for m in body["machines"]] == ["m1", "m3", "m4"]
    assert body["machines"][0]["config"] == {"image": "i", "guest": GUEST}
    assert body["machines"][2]["app_name"] == "b"
    assert (body["last_machine_id"], body["last_updated_at"]) == ("m4", "2026-01-01T00:00:04Z")
    assert "next_cursor" not in body


def test_filters() -> None:
    def ids(**params: list[str]) -> list[str]:
        return [str(m["id"]) for m in page(DOCS, parse_query(params)).doc()["machines"]]
    assert ids(include_deleted=["true"]) == ["m1", "m2", "m3", "m4"]
    assert ids(region=["syd"]) == ["m4"]
    assert ids(state=["stopped,started"]) == ["m1", "m3", "m4"]
    assert ids(state=["destroyed"], include_deleted=["1"]) == ["m2"]
    assert ids(updated_after=["2026-01-01T00:00:01Z"]) == ["m3", "m4"]
    summary = page(DOCS, parse_query({"summary": ["true"]})).doc()["machines"]
    assert all("config" not in m for m in summary)


def test_the_cursor_walks_every_machine_once() -> None:
    seen: list[str] = []
    params: dict[str, list[str]] = {"limit": ["2"], "include_deleted": ["true"]}
    while True:
        body = page(DOCS, parse_query(params)).doc()
        seen += [str(m["id"]) for m in body["machines"]]
        if "next_cursor" not in body:
            break
        params["cursor"] = [body["next_cursor"]]
    assert seen == ["m1", "m2", "m3", "m4"]
    assert decode_cursor(encode_cursor(stamp(DOCS[1]), DOCS[1].id)) == (stamp(DOCS[1]), "m1")


def test_limit_is_capped_and_bad_parameters_are_400() -> None:
    assert parse_query({"limit": ["5000"]}).limit == 1000
    for bad in ({"limit": ["0"]}, {"limit": ["x"]}, {"updated_after": ["soon"]},
                {"cursor": ["!!!"]}, {"cursor": ["bm90IGpzb24"]}):
        with pytest.raises(BadRequest):
            parse_query(bad)


def test_addresses_of_each_kind_avoid_those_taken() -> None:
    rng = random.Random(7)
    v4 = allocate("v4", set(), rng.randrange)
    assert ipaddress.ip_address(v4) in V4_POOL
    assert v4 != SHARED_V4
    assert ipaddress.ip_address(allocate("v6", set(), rng.randrange)).version == 6
    assert allocate("shared_v4", {SHARED_V4}, rng.randrange) == SHARED_V4
    draws = iter([0, 0, 1])
    first = allocate("v4", set(), lambda n: next(draws))
    assert allocate("v4", {first}, lambda n: next(draws)) != first
    with pytest.raises(Unavailable):
        allocate("v4", {first}, lambda n: 0)
    with pytest.raises(BadRequest):
        allocate("v5", set(), rng.randrange)
