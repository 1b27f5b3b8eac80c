"""Rows on gossip and sync: every form decodes back, malformed input is refused."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

import pytest

from bodega.registry.membership.core.buckets import BUCKETS
from bodega.registry.membership.core.messages import (
    DecodeError,
    Item,
    Message,
    encode,
    encoded_size,
)
from bodega.registry.replication.core.exchange import (
    DigestReply,
    DigestRequest,
    SyncReply,
    SyncRequest,
)
from bodega.registry.replication.core.known import Known
from bodega.registry.sync.core.rowwire import (
    ITEM_BUDGET,
    decode_digest_reply,
    decode_digest_request,
    decode_item,
    decode_reply,
    decode_request,
    digest_reply_json,
    digest_request_json,
    item_floor,
    item_key,
    reply_json,
    request_json,
    row_item,
    row_json,
)
from tests.unit.registry.replication.row_kit import machine_doc, row, worker_doc

PAYLOAD_BUDGET = 1347  # a 1400-byte packet less its 53-byte envelope


def roundtrip(item: Item) -> Item:
    """Through the real packet codec, as gossip carries it."""
    message = encode(Message("w1", items=(item,)))
    assert len(message) <= PAYLOAD_BUDGET
    from bodega.registry.membership.core.messages import decode
    return decode(message).items[0]


def test_a_small_row_travels_whole() -> None:
    r = row("workers", "w1", worker_doc("w1"), "w1", 7, 123, 4)
    item = row_item(r)
    assert item.key == item_key("w1", 7)
    assert "r" in item.data
    assert decode_item(roundtrip(item)) == r


def test_a_large_row_travels_compressed() -> None:
    doc = machine_doc("m1", "w1", config={"env": {f"VAR_{i}": "value" for i in range(60)}})
    r = row("machines", "m1", doc, "w1", 3)
    item = row_item(r)
    assert "z" in item.data
    assert encoded_size(item) <= ITEM_BUDGET
    assert decode_item(roundtrip(item)) == r


def test_a_row_too_large_even_compressed_travels_as_a_notice() -> None:
    noise = base64.b64encode(bytes(range(256)) * 12).decode()  # does not compress
    r = row("machines", "m1", machine_doc("m1", "w1", blob=noise), "w1", 9)
    item = row_item(r)
    assert item.data == {"n": ["w1", 9]}
    assert decode_item(roundtrip(item)) == ("w1", 9)


def test_a_tombstone_travels() -> None:
    r = row("machines", "m1", None, "w1", 2)
    assert decode_item(roundtrip(row_item(r))) == r


@pytest.mark.parametrize("data", [
    {}, {"r": "x"}, {"r": ["machines", "m1", {}, "w1", 1, 1]},
    {"r": ["machines", "m1", [], "w1", 1, 1, 0]}, {"r": ["machines", "m1", {}, "w1", -1, 1, 0]},
    {"r": ["machines", "m1", {}, "w1", True, 1, 0]}, {"z": 5}, {"z": "not base64!"},
    {"z": base64.b64encode(b"not zlib").decode()},
    {"z": base64.b64encode(zlib.compress(b"\x00" * (1 << 20))).decode()},  # a zip bomb
    {"n": ["w1"]}, {"n": ["w1", 0]}, {"n": [1, 2]},
])
def test_malformed_items_are_refused(data: dict[str, Any]) -> None:
    with pytest.raises(DecodeError):
        decode_item(Item("row:w1:1", data))


def test_sync_messages_round_trip_through_json() -> None:
    request = SyncRequest("b", {"a": Known(9, ((2, 3),)), "c": Known(1)})
    assert decode_request(json.loads(json.dumps(request_json(request)))) == request
    reply = SyncReply([row("apps", "x", {"name": "x", "org_slug": "o"}, "a", 2)],
                      {"a": [(2, 3)]}, ["c"], {"c": 1})
    assert decode_reply(json.loads(json.dumps(reply_json(reply)))) == reply


@pytest.mark.parametrize("doc", [
    [], {"from": "b"}, {"from": "b", "known": {"a": [1, [[3, 2]]]}},
    {"from": 3, "known": {}}, {"from": "b", "known": {"": [1]}},
])
def test_malformed_sync_requests_are_refused(doc: Any) -> None:
    with pytest.raises(DecodeError):
        decode_request(doc)


@pytest.mark.parametrize("doc", [
    [], {"rows": {}}, {"vouched": {"a": [[0, 1]]}}, {"vouched": {"a": [[2, 1]]}},
    {"horizons": {"a": -1}}, {"rows": [["apps"]]}, {"reset": [""]},
])
def test_malformed_sync_replies_are_refused(doc: Any) -> None:
    with pytest.raises(DecodeError):
        decode_reply(doc)


def test_digest_messages_round_trip_and_a_scoped_request_keeps_its_buckets() -> None:
    digest = DigestRequest("b", tuple(range(BUCKETS)))
    assert decode_digest_request(json.loads(json.dumps(digest_request_json(digest)))) == digest
    assert len(json.dumps(digest_request_json(digest))) < 800  # whatever the fleet's size
    reply = DigestReply((3, 17))
    assert decode_digest_reply(json.loads(json.dumps(digest_reply_json(reply)))) == reply
    scoped = SyncRequest("b", {"a": Known(9)}, (3, 17))
    assert decode_request(json.loads(json.dumps(request_json(scoped)))) == scoped
    more = SyncReply(more=True)
    assert decode_reply(json.loads(json.dumps(reply_json(more)))) == more


@pytest.mark.parametrize("doc", [
    {"from": "b"}, {"from": "b", "digest": "AAAA"}, {"from": "b", "digest": "not base64!"},
    {"from": "", "digest": base64.b64encode(bytes(8 * BUCKETS)).decode()},
])
def test_malformed_digest_requests_are_refused(doc: Any) -> None:
    with pytest.raises(DecodeError):
        decode_digest_request(doc)


@pytest.mark.parametrize("doc", [{}, {"differ": [BUCKETS]}, {"differ": [-1]}, {"differ": "x"}])
def test_malformed_digest_replies_and_buckets_are_refused(doc: Any) -> None:
    with pytest.raises(DecodeError):
        decode_digest_reply(doc)
    with pytest.raises(DecodeError):
        decode_request({"from": "b", "known": {}, "buckets": doc.get("differ", "x")})


def test_an_item_carries_its_origins_floor() -> None:
    r = row("workers", "w1", {"name": "w1"}, "w1", 10)
    assert item_floor(roundtrip(row_item(r, floor=9))) == 9
    assert item_floor(row_item(r)) == 0
    with pytest.raises(DecodeError):
        item_floor(Item("row:w1:10", {"r": row_json(r), "s": -1}))
