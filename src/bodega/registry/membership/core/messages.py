"""SWIM messages and their wire encoding (compact JSON, one message per packet).

A packet carries one ``Message``: who sent it, one body (a probe, an ack, a
state exchange, a direct item, or nothing for a pure gossip packet), and
piggybacked membership updates and broadcast items. Records travel as
positional arrays to keep packets small:

    {"t":"ping","f":"w1","s":7,"n":"w2","u":[[name,host,port,role,region,meta,inc,gen,st,by]],
     "b":[[key,{...}]]}

A hosted member's record (``members.py``) carries its agent's name in its
metadata (``HOST_META``), so members of a version before hosted members
decode it too: they take it for a member like any other, and its agent
answers their probes for it.

``decode`` validates every field and raises ``DecodeError`` on anything else,
so a malformed packet is dropped and counted, never fatal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bodega.model.json import JsonObject
from bodega.registry.membership.core.buckets import BUCKETS
from bodega.registry.membership.core.memberdigest import pack, unpack
from bodega.registry.membership.core.members import (
    HOST_META,
    MAX_NAME,
    Addr,
    MemberRecord,
    Role,
    Status,
)

MAX_KEY = 200
MAX_SEQ = 2**62
_STATUS_CODES = {Status.ALIVE: "a", Status.SUSPECT: "s", Status.DEAD: "d", Status.LEFT: "l"}
_STATUSES = {code: status for status, code in _STATUS_CODES.items()}
_ROLES = {str(role): role for role in Role}
# What a non-empty piggyback section adds around its elements: `,"u":[]`.
SECTION_OVERHEAD = 7


class DecodeError(ValueError):
    """A packet that is not a well-formed message."""


@dataclass(frozen=True)
class Item:
    """An opaque broadcast item: ``key`` de-duplicates it across the cluster."""

    key: str
    data: JsonObject


@dataclass(frozen=True)
class Ping:
    seq: int
    target: str  # the name the sender expects: a different node at that address ignores it


@dataclass(frozen=True)
class Ack:
    seq: int


@dataclass(frozen=True)
class Nack:
    seq: int  # a relay reached no one in time (Lifeguard: the requester is not the slow one)


@dataclass(frozen=True)
class PingReq:
    seq: int  # the requester's probe sequence, echoed in the forwarded ack or nack
    target: str
    addr: Addr


@dataclass(frozen=True)
class Sync:
    """A slice of the sender's member table; ``reply`` asks for the receiver's in return."""

    records: tuple[MemberRecord, ...]
    reply: bool
    # A push-pull sends its table's digest instead of the table: the peer answers
    # with its records in the buckets that differ and ``want``s ours in them.
    digest: tuple[int, ...] | None = None
    want: tuple[int, ...] = ()


@dataclass(frozen=True)
class Direct:
    item: Item


Body = Ping | Ack | Nack | PingReq | Sync | Direct | None


@dataclass(frozen=True)
class Message:
    sender: str
    body: Body = None
    updates: tuple[MemberRecord, ...] = ()
    items: tuple[Item, ...] = ()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode()


def record_json(record: MemberRecord) -> list[Any]:
    host, port = record.addr
    return [record.name, host, port, str(record.role), record.region, record.wire_meta,
            record.incarnation, record.generation, _STATUS_CODES[record.status], record.by]


def item_json(item: Item) -> list[Any]:
    return [item.key, item.data]


def encoded_size(value: MemberRecord | Item) -> int:
    """Bytes ``value`` takes inside an encoded message (its array, without the comma)."""
    if isinstance(value, Item):
        return len(_dumps(item_json(value)))
    return len(_dumps(record_json(value)))


def _body_json(body: Body) -> JsonObject:
    match body:
        case None:
            return {"t": "gossip"}
        case Ping(seq, target):
            return {"t": "ping", "s": seq, "n": target}
        case Ack(seq):
            return {"t": "ack", "s": seq}
        case Nack(seq):
            return {"t": "nack", "s": seq}
        case PingReq(seq, target, (host, port)):
            return {"t": "preq", "s": seq, "n": target, "h": host, "p": port}
        case Sync(records, reply, digest, want):
            doc: JsonObject = {"t": "sync", "r": reply, "m": [record_json(r) for r in records]}
            if digest is not None:
                doc["g"] = pack(digest)
            if want:
                doc["w"] = list(want)
            return doc
        case Direct(item):
            return {"t": "direct", "d": item_json(item)}


def encode(message: Message) -> bytes:
    doc = _body_json(message.body)
    doc["f"] = message.sender
    if message.updates:
        doc["u"] = [record_json(r) for r in message.updates]
    if message.items:
        doc["b"] = [item_json(i) for i in message.items]
    return _dumps(doc)


def decode(data: bytes) -> Message:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise DecodeError(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise DecodeError("a message is a JSON object")
    try:
        return Message(
            sender=_name(doc.get("f")),
            body=_body(doc),
            updates=tuple(_record(r) for r in _list(doc.get("u", []))),
            items=tuple(_item(i) for i in _list(doc.get("b", []))),
        )
    except ValueError as e:  # a record breaking member bounds
        raise DecodeError(str(e)) from None


def _body(doc: JsonObject) -> Body:
    kind = doc.get("t")
    if kind == "gossip":
        return None
    if kind == "ping":
        return Ping(_seq(doc.get("s")), _name(doc.get("n")))
    if kind == "ack":
        return Ack(_seq(doc.get("s")))
    if kind == "nack":
        return Nack(_seq(doc.get("s")))
    if kind == "preq":
        return PingReq(_seq(doc.get("s")), _name(doc.get("n")),
                       (_str(doc.get("h")), _port(doc.get("p"))))
    if kind == "sync":
        reply = doc.get("r")
        if not isinstance(reply, bool):
            raise DecodeError("sync.r must be a boolean")
        digest = None
        if "g" in doc:
            try:
                digest = unpack(_str(doc["g"]))
            except ValueError as e:
                raise DecodeError(f"bad member digest: {e}") from None
        want = _list(doc.get("w", []))
        if len(want) > BUCKETS or any(type(b) is not int or not 0 <= b < BUCKETS for b in want):
            raise DecodeError(f"a bucket is a number in [0, {BUCKETS})")
        return Sync(tuple(_record(r) for r in _list(doc.get("m"))), reply, digest, tuple(want))
    if kind == "direct":
        return Direct(_item(doc.get("d")))
    raise DecodeError(f"unknown message type {kind!r}")


def record_from_json(value: Any) -> MemberRecord:
    """A record from ``record_json``'s array; ``DecodeError`` if it is not one."""
    try:
        return _record(value)
    except ValueError as e:  # a record breaking member bounds
        raise DecodeError(str(e)) from e


def _record(value: Any) -> MemberRecord:
    # The hot path of a converging cluster (every packet carries a dozen
    # records), hence exact type checks inline; ``type(x) is int`` also
    # rejects booleans. Bounds on names, hosts and metadata are the record's own.
    if type(value) is not list or len(value) != 10:
        raise DecodeError("a member record is an array of 10 fields")
    name, host, port, role, region, meta, inc, gen, status, by = value
    if not (type(name) is str and type(host) is str and type(region) is str
            and type(by) is str and type(meta) is dict and type(role) is str
            and type(status) is str and type(port) is int and type(inc) is int
            and type(gen) is int):
        raise DecodeError("malformed member record")
    if not (role in _ROLES and status in _STATUSES and 0 <= port <= 65535
            and 0 <= inc < MAX_SEQ and 0 <= gen < MAX_SEQ and len(by) <= MAX_NAME):
        raise DecodeError("member record out of range")
    agent = meta.get(HOST_META, "")
    if agent:
        meta = {k: v for k, v in meta.items() if k != HOST_META}
    if type(agent) is not str:
        raise DecodeError("malformed member record")
    return MemberRecord(name, (host, port), _ROLES[role], region, meta, inc, gen,
                        _STATUSES[status], by, agent)


def _item(value: Any) -> Item:
    fields = _list(value)
    if len(fields) != 2:
        raise DecodeError("an item is [key, data]")
    key, data = fields
    if not isinstance(data, dict):
        raise DecodeError("item data must be an object")
    key = _str(key)
    if not key or len(key) > MAX_KEY:
        raise DecodeError(f"item key must be 1..{MAX_KEY} characters")
    return Item(key, data)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise DecodeError("expected an array")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise DecodeError("expected a string")
    return value


def _name(value: Any) -> str:
    name = _str(value)
    if not name or len(name) > MAX_NAME:
        raise DecodeError("bad member name")
    return name


def _seq(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_SEQ:
        raise DecodeError("expected a non-negative integer")
    return value


def _port(value: Any) -> int:
    port = _seq(value)
    if port > 65535:
        raise DecodeError("bad port")
    return port
