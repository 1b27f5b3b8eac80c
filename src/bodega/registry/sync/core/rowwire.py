"""Rows and sync messages on the wire: compact JSON, checked on the way in.

A row travels as a positional array::

    [table, key, doc | null, owner, version, hlc_wall_ms, hlc_logical]

On gossip a row rides as a broadcast ``Item`` keyed ``row:<owner>:<version>``
(unique per write, so the cluster-wide seen-set de-duplicates it), in the
first form that fits ``ITEM_BUDGET`` bytes:

    {"r": row}            the row itself (workers rows, most machine rows)
    {"z": "<base64>"}     the row's JSON, zlib-compressed (large configs)
    {"n": [owner, version]}   only a notice that the version exists

An item from a node that started on an empty view also carries ``"s"``,
its *floor*: the versions below its first write, which hold nothing of this
life. A replica hearing of a new origin marks them seen at once; without it,
every node would pull from every new writer just to learn that its versions
start above a wall-clock base (``writes.fresh_base``).

A notice makes every replica that hears it record a gap for that version,
and a replica with gaps syncs sooner, from the origin first: large rows
travel over the sync stream (TCP) instead of being cut into datagrams that
would all have to arrive. ``ITEM_BUDGET`` leaves a packet room for
membership updates, so a row never waits long for a packet with space.

Decoding checks structure only and raises ``DecodeError``; whether a row is
acceptable is ``validate.problem``'s call.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from bodega.model.json import JsonObject
from bodega.registry.membership.core.buckets import BUCKETS
from bodega.registry.membership.core.messages import DecodeError, Item, encoded_size
from bodega.registry.replication.core.exchange import (
    DigestReply,
    DigestRequest,
    SyncReply,
    SyncRequest,
)
from bodega.registry.replication.core.hlc import Stamp
from bodega.registry.replication.core.known import Known, Span
from bodega.registry.replication.core.rows import Row
from bodega.registry.replication.core.validate import MAX_DOC_BYTES

ITEM_BUDGET = 1000  # bytes an item may take in a 1347-byte packet payload
ITEM_PREFIX = "row:"
MAX_INT = 2**62


def row_json(row: Row) -> list[Any]:
    return [row.table, row.key, row.doc, row.owner, row.version, row.stamp.wall_ms,
            row.stamp.logical]


def decode_row(value: Any) -> Row:
    if type(value) is not list or len(value) != 7:
        raise DecodeError("a row is an array of 7 fields")
    table, key, doc, owner, version, wall, logical = value
    if not (type(table) is str and type(key) is str and type(owner) is str):
        raise DecodeError("row table, key and owner are strings")
    if doc is not None and type(doc) is not dict:
        raise DecodeError("a row's doc is an object or null")
    for number in (version, wall, logical):
        if type(number) is not int or not 0 <= number < MAX_INT:
            raise DecodeError("row version and stamp are non-negative integers")
    return Row(table, key, doc, owner, version, Stamp(wall, logical, owner))


# ── gossip items ─────────────────────────────────────────────────────────────

def item_key(owner: str, version: int) -> str:
    return f"{ITEM_PREFIX}{owner}:{version}"


def row_item(row: Row, floor: int = 0) -> Item:
    """The broadcast item for ``row``: whole, compressed, or a notice (with the floor)."""
    key = item_key(row.owner, row.version)
    extra: JsonObject = {"s": floor} if floor else {}
    body = row_json(row)
    item = Item(key, {"r": body, **extra})
    if encoded_size(item) <= ITEM_BUDGET:
        return item
    packed = zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 6)
    item = Item(key, {"z": base64.b64encode(packed).decode(), **extra})
    if encoded_size(item) <= ITEM_BUDGET:
        return item
    return Item(key, {"n": [row.owner, row.version], **extra})


def item_floor(item: Item) -> int:
    """The origin's floor the item carries (0: none); ``DecodeError`` if malformed."""
    floor = item.data.get("s", 0)
    if type(floor) is not int or not 0 <= floor < MAX_INT:
        raise DecodeError("a floor is a version")
    return floor


def is_row_item(item: Item) -> bool:
    return item.key.startswith(ITEM_PREFIX)


def decode_item(item: Item) -> Row | tuple[str, int]:
    """A row, or (owner, version) for a notice; ``DecodeError`` if malformed."""
    data = item.data
    if "r" in data:
        return decode_row(data["r"])
    if "z" in data:
        text = data["z"]
        if type(text) is not str:
            raise DecodeError("z must be base64 text")
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(base64.b64decode(text, validate=True), MAX_DOC_BYTES * 2)
            if inflater.unconsumed_tail:
                raise DecodeError("compressed row too large")
            return decode_row(json.loads(raw))
        except (ValueError, zlib.error, RecursionError) as e:
            raise DecodeError(f"bad compressed row: {e}") from None
    if "n" in data:
        notice = data["n"]
        if (type(notice) is not list or len(notice) != 2 or type(notice[0]) is not str
                or type(notice[1]) is not int or not 0 < notice[1] < MAX_INT):
            raise DecodeError("a notice is [owner, version]")
        return notice[0], notice[1]
    raise DecodeError("a row item has r, z or n")


# ── sync ─────────────────────────────────────────────────────────────────────

def digest_request_json(request: DigestRequest) -> JsonObject:
    packed = b"".join(d.to_bytes(8, "big") for d in request.digest)
    return {"from": request.sender, "digest": base64.b64encode(packed).decode()}


def decode_digest_request(doc: Any) -> DigestRequest:
    if type(doc) is not dict or type(doc.get("from")) is not str or type(
            doc.get("digest")) is not str:
        raise DecodeError("a digest request is {from, digest}")
    try:
        packed = base64.b64decode(doc["digest"], validate=True)
    except ValueError as e:
        raise DecodeError(f"bad digest: {e}") from None
    if len(packed) != BUCKETS * 8:
        raise DecodeError(f"a digest is {BUCKETS} 8-byte buckets")
    digest = tuple(int.from_bytes(packed[i:i + 8], "big") for i in range(0, len(packed), 8))
    return DigestRequest(_origin(doc["from"]), digest)


def digest_reply_json(reply: DigestReply) -> JsonObject:
    return {"differ": list(reply.differ)}


def decode_digest_reply(doc: Any) -> DigestReply:
    if type(doc) is not dict or type(doc.get("differ")) is not list:
        raise DecodeError("a digest reply is {differ}")
    return DigestReply(_buckets(doc["differ"]))


def request_json(request: SyncRequest) -> JsonObject:
    doc: JsonObject = {
        "from": request.sender,
        "known": {origin: known.to_json() for origin, known in request.known.items()}}
    if request.buckets is not None:
        doc["buckets"] = list(request.buckets)
    return doc


def decode_request(doc: Any) -> SyncRequest:
    if type(doc) is not dict or type(doc.get("from")) is not str or type(
            doc.get("known")) is not dict:
        raise DecodeError("a sync request is {from, known}")
    try:
        known = {_origin(o): Known.from_json(k) for o, k in doc["known"].items()}
    except ValueError as e:
        raise DecodeError(f"bad known versions: {e}") from None
    buckets = doc.get("buckets")
    if buckets is not None and type(buckets) is not list:
        raise DecodeError("buckets is a list of bucket numbers")
    return SyncRequest(doc["from"], known, None if buckets is None else _buckets(buckets))


def _buckets(value: list[Any]) -> tuple[int, ...]:
    if len(value) > BUCKETS or any(type(b) is not int or not 0 <= b < BUCKETS for b in value):
        raise DecodeError(f"a bucket is a number in [0, {BUCKETS})")
    return tuple(value)


def reply_json(reply: SyncReply) -> JsonObject:
    doc: JsonObject = {"rows": [row_json(r) for r in reply.rows],
                           "vouched": {o: [list(s) for s in spans]
                                       for o, spans in reply.vouched.items()},
                           "reset": reply.reset, "horizons": reply.horizons}
    if reply.more:
        doc["more"] = True
    return doc


def decode_reply(doc: Any) -> SyncReply:
    if type(doc) is not dict:
        raise DecodeError("a sync reply is an object")
    rows, vouched = doc.get("rows", []), doc.get("vouched", {})
    reset, horizons = doc.get("reset", []), doc.get("horizons", {})
    more = doc.get("more", False)
    if not (type(rows) is list and type(vouched) is dict and type(reset) is list
            and type(horizons) is dict and type(more) is bool):
        raise DecodeError("malformed sync reply")
    spans: dict[str, list[Span]] = {}
    for origin, value in vouched.items():
        if type(value) is not list:
            raise DecodeError("vouched spans are arrays")
        spans[_origin(origin)] = [_span(s) for s in value]
    for purged in horizons.values():
        if type(purged) is not int or not 0 <= purged < MAX_INT:
            raise DecodeError("a horizon is a version")
    return SyncReply([decode_row(r) for r in rows], spans, [_origin(o) for o in reset],
                     {_origin(o): int(p) for o, p in horizons.items()}, more)


def _origin(value: Any) -> str:
    if type(value) is not str or not value:
        raise DecodeError("an origin is a node name")
    return value


def _span(value: Any) -> Span:
    if (type(value) is not list or len(value) != 2 or type(value[0]) is not int
            or type(value[1]) is not int or not 1 <= value[0] <= value[1] < MAX_INT):
        raise DecodeError("a span is [lo, hi]")
    return value[0], value[1]
