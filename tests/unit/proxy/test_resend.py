"""Which requests go to another machine after one may have received them (its host stopped
acknowledging): those whose method says sending twice does what sending once did, and
that carry no body (it was read from the client as it went out)."""

from __future__ import annotations

from bodega.proxy.exchange import resendable
from bodega.proxy.http1 import Head


def request(method: bytes, *headers: tuple[bytes, bytes]) -> Head:
    return Head([method, b"/", b"HTTP/1.1"], [(b"host", b"web.localhost"), *headers])


def test_an_idempotent_request_without_a_body_is_sent_again() -> None:
    for method in (b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"):
        assert resendable(request(method)), method
    assert resendable(request(b"GET", (b"content-length", b"0")))


def test_any_other_method_is_not() -> None:
    for method in (b"POST", b"PATCH", b"CONNECT", b"get", b"PROPFIND"):
        assert not resendable(request(method)), method


def test_nor_is_a_request_with_a_body() -> None:
    assert not resendable(request(b"PUT", (b"content-length", b"12")))
    assert not resendable(request(b"DELETE", (b"transfer-encoding", b"chunked")))
