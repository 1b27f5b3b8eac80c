"""A port forward's rules: the port a request names, and what the relay makes of each thing
an end reports (bytes, a text frame, a close, an end of stream, a failure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.model.errors import BadRequest
from bodega.model.forwarding import (
    ABNORMAL,
    FAILED,
    MAX_REASON,
    NO_STATUS,
    NORMAL,
    UNSUPPORTED,
    Deliver,
    Finish,
    Frame,
    clip_reason,
    closing,
    on_chunk,
    on_close,
    on_failure,
    on_frame,
    port_number,
)


@pytest.mark.parametrize(("given", "port"), [("1", 1), ("5432", 5432), ("65535", 65535),
                                             ("08080", 8080)])
def test_a_port_from_1_to_65535_is_taken(given: str, port: int) -> None:
    assert port_number(given) == port


@pytest.mark.parametrize("given", [None, "", "0", "65536", "-1", "x", "54 32", "5432.0",
                                   "²", "٣", "9" * 5000])
def test_anything_else_is_a_400_naming_what_was_given(given: str | None) -> None:
    with pytest.raises(BadRequest, match="port must be a number from 1 to 65535") as refused:
        port_number(given)
    assert refused.value.http_status == 400
    assert ("nothing" if given is None else repr(given)[:20]) in refused.value.message


def test_bytes_are_handed_on_and_an_empty_frame_carries_nothing() -> None:
    assert on_frame(Frame.BYTES, b"abc") == Deliver(b"abc")
    assert on_frame(Frame.BYTES, b"") is None


def test_a_text_frame_ends_the_forward_as_unsupported() -> None:
    finish = on_frame(Frame.TEXT, peer="the broker")
    assert isinstance(finish, Finish)
    assert finish.code == UNSUPPORTED
    assert finish.failed
    assert "the broker sent a text frame" in finish.reason


def test_a_clean_close_stays_clean_and_keeps_its_reason() -> None:
    assert on_close(NORMAL) == Finish(NORMAL, "")
    assert on_close(NO_STATUS, "bye") == Finish(NORMAL, "bye")
    assert not on_close(NORMAL).failed


def test_a_failed_close_carries_its_reason_on_or_says_who_closed() -> None:
    told = on_close(FAILED, "no connection to machine m1 port 5432: connection reset")
    assert told == Finish(FAILED, "no connection to machine m1 port 5432: connection reset")
    assert told.failed
    assert on_close(1012, peer="worker w1") == Finish(1012, "worker w1 closed the link (code 1012)")
    lost = on_close(None, peer="the broker")
    assert lost == Finish(ABNORMAL, "the link to the broker was lost")
    assert lost.failed


def test_a_stream_hands_on_its_bytes_and_its_end_is_clean() -> None:
    assert on_chunk(b"x" * 10) == Deliver(b"x" * 10)
    assert on_chunk(b"") == Finish(NORMAL)
    failed = on_failure("the connection to machine m1 port 22", "connection reset by peer")
    assert failed == Finish(FAILED,
                            "the connection to machine m1 port 22: connection reset by peer")


def test_the_other_end_is_told_a_code_it_may_be_sent() -> None:
    assert closing(Finish(NORMAL, "")) == (NORMAL, "")
    # A lost link's 1006 is only ever reported: the next hop hears 1011, the reason kept.
    assert closing(Finish(ABNORMAL, "the link to the broker was lost")) == (
        FAILED, "the link to the broker was lost")
    assert closing(Finish(1015, "tls")) == (FAILED, "tls")
    assert closing(Finish(1012, "restart")) == (1012, "restart")
    assert closing(Finish(UNSUPPORTED, "text")) == (UNSUPPORTED, "text")
    assert closing(Finish(99, "odd")) == (FAILED, "odd")


@given(st.text())
def test_a_reason_always_fits_a_close_frame(reason: str) -> None:
    clipped = clip_reason(reason)
    assert len(clipped.encode()) <= MAX_REASON
    if len(reason.encode()) <= MAX_REASON:
        assert clipped == reason
    else:
        assert clipped.endswith("...")
        assert reason.startswith(clipped[:-3])
