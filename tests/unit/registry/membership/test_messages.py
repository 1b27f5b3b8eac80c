"""The wire encoding: everything round-trips; anything else is a DecodeError, never a crash."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.registry.membership.core.buckets import BUCKETS
from bodega.registry.membership.core.members import (
    HOST_META,
    MAX_NAME,
    MemberRecord,
    Role,
    Status,
)
from bodega.registry.membership.core.messages import (
    Ack,
    DecodeError,
    Direct,
    Item,
    Message,
    Nack,
    Ping,
    PingReq,
    Sync,
    decode,
    encode,
    encoded_size,
)

printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
names = st.text(printable, min_size=1, max_size=MAX_NAME)
seqs = st.integers(min_value=0, max_value=2**62 - 1)
ports = st.integers(min_value=0, max_value=65535)
hosts = st.text(printable, min_size=1, max_size=60)
# Metadata may hold any text; its bound is on the encoded size (escapes included).
# Any metadata but the key the member's agent fills in itself (a record refuses it).
metas = st.dictionaries(st.text(max_size=6).filter(lambda key: key != HOST_META),
                        st.text(max_size=8), max_size=4)
records = st.builds(
    MemberRecord, name=names, addr=st.tuples(hosts, ports), role=st.sampled_from(Role),
    region=st.text(printable, max_size=32), meta=metas, incarnation=seqs, generation=seqs,
    status=st.sampled_from(Status), by=st.text(printable, max_size=MAX_NAME),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
items = st.builds(Item, key=st.text(min_size=1, max_size=200),
                  data=st.dictionaries(st.text(max_size=10), json_values, max_size=5))
bodies = st.one_of(
    st.none(),
    st.builds(Ping, seqs, names),
    st.builds(Ack, seqs),
    st.builds(Nack, seqs),
    st.builds(PingReq, seqs, names, st.tuples(hosts, ports)),
    st.builds(Sync, st.lists(records, max_size=4).map(tuple), st.booleans()),
    st.builds(Direct, items),
)
messages = st.builds(Message, sender=names, body=bodies,
                     updates=st.lists(records, max_size=4).map(tuple),
                     items=st.lists(items, max_size=3).map(tuple))


@given(messages)
@settings(max_examples=300)
def test_every_message_round_trips(message: Message) -> None:
    assert decode(encode(message)) == message


@given(records)
def test_a_record_adds_exactly_its_own_size_to_a_message(record: MemberRecord) -> None:
    without = len(encode(Message("a", None, updates=(record, record))))
    with_one_more = len(encode(Message("a", None, updates=(record, record, record))))
    assert with_one_more - without == encoded_size(record) + 1


@given(st.binary(max_size=300))
@settings(max_examples=300)
def test_random_bytes_are_a_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode(data)


@given(json_values)
@settings(max_examples=300)
def test_random_json_is_a_decode_error_or_a_message(value: Any) -> None:
    with contextlib.suppress(DecodeError):
        assert isinstance(decode(json.dumps(value).encode()), Message)


def _ping(**changes: Any) -> bytes:
    doc = {"t": "ping", "f": "a", "s": 1, "n": "b", **changes}
    return json.dumps(doc).encode()


def _with_record(record: list[Any]) -> bytes:
    return json.dumps({"t": "gossip", "f": "a", "u": [record]}).encode()


GOOD_RECORD = ["b", "10.0.0.2", 7946, "worker", "ams", {}, 0, 1, "a", ""]


@pytest.mark.parametrize("packet", [
    b"", b"\xff\xfe", b"[]", b"null", b'"ping"', b"[" * 5000,
    _ping(t="shout"), _ping(s=True), _ping(s=-1), _ping(s=2**70), _ping(s="1"), _ping(n=""),
    _ping(n="x" * 65), _ping(f=None),
    json.dumps({"t": "preq", "f": "a", "s": 1, "n": "b", "h": "h", "p": 70000}).encode(),
    json.dumps({"t": "sync", "f": "a", "r": 1, "m": []}).encode(),
    json.dumps({"t": "direct", "f": "a", "d": ["k", []]}).encode(),
    json.dumps({"t": "direct", "f": "a", "d": ["", {}]}).encode(),
    json.dumps({"t": "gossip", "f": "a", "u": {}}).encode(),
    _with_record(GOOD_RECORD[:9]),
    _with_record([*GOOD_RECORD[:3], "scheduler", *GOOD_RECORD[4:]]),
    _with_record([*GOOD_RECORD[:8], "x", ""]),
    _with_record([*GOOD_RECORD[:5], {"k": 1}, *GOOD_RECORD[6:]]),
    _with_record([*GOOD_RECORD[:2], 99999, *GOOD_RECORD[3:]]),
    _with_record([*GOOD_RECORD[:6], False, *GOOD_RECORD[7:]]),
])
def test_malformed_packets_are_decode_errors(packet: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(packet)


def test_a_well_formed_record_decodes() -> None:
    message = decode(_with_record(GOOD_RECORD))
    assert message.updates == (MemberRecord("b", ("10.0.0.2", 7946), Role.WORKER, "ams"),)


def test_a_push_pull_digest_and_its_wanted_buckets_round_trip_and_bad_ones_are_refused() -> None:
    me = MemberRecord("a", ("10.0.0.1", 7946), Role.WORKER, "ams", {}, 0, 1)
    sync = Message("a", Sync((me,), True, tuple(range(BUCKETS)), (1, 5)))
    assert decode(encode(sync)) == sync
    doc = json.loads(encode(sync))
    for bad in ({"g": "AAAA"}, {"g": 5}, {"w": [BUCKETS]}, {"w": ["1"]}):
        with pytest.raises(DecodeError):
            decode(json.dumps({**doc, **bad}).encode())
