"""The session's rules: the cookie, the CSRF token, where a login may lead, forms, origins."""

from __future__ import annotations

import pytest

from bodega.broker.ui.core import session


def test_the_cookie_keeps_any_token_out_of_reach_of_scripts_and_other_sites() -> None:
    token = "bdg_a;b,c d=é"
    header = session.set_cookie(token, secure=False)
    name, _, rest = header.partition("=")
    value = rest.split(";")[0]
    assert name == session.COOKIE
    assert token not in header  # encoded: any token fits the cookie's alphabet
    assert session.cookie_token(value) == token
    flags = {f.strip() for f in rest.split(";")[1:]}
    assert flags == {"Path=/ui", "HttpOnly", "SameSite=Strict"}
    assert "Secure" in session.set_cookie(token, secure=True)
    assert "Max-Age=0" in session.clear_cookie(secure=False)


@pytest.mark.parametrize("value", ["", "%%%", "a" * 2000, "/w==", "-_-_"])
def test_a_cookie_that_cannot_hold_a_token_holds_none(value: str) -> None:
    assert session.cookie_token(value) is None


def test_the_csrf_token_is_the_sessions_and_says_nothing_of_the_token() -> None:
    csrf = session.csrf_token("secret-token")
    assert "secret-token" not in csrf
    assert session.csrf_ok("secret-token", csrf)
    assert not session.csrf_ok("other-token", csrf)
    assert not session.csrf_ok("secret-token", None)
    assert not session.csrf_ok("secret-token", "")
    assert session.csrf_token("secret-token") == csrf  # the same on every broker


@pytest.mark.parametrize(("target", "expected"), [
    (None, "/ui/"), ("", "/ui/"), ("/ui/apps/x", "/ui/apps/x"),
    ("/ui/topology?region=ams&page=2", "/ui/topology?region=ams&page=2"), ("/ui", "/ui"),
    ("https://evil.example/ui/", "/ui/"), ("//evil.example/ui/", "/ui/"), ("/v1/apps", "/ui/"),
    ("/ui/../v1/apps", "/ui/"), ("/uix", "/ui/"), ("/ui//evil.example", "/ui/"),
    ("/ui/\\evil", "/ui/"), ("javascript:alert(1)", "/ui/"),
])
def test_a_login_leads_only_into_the_dashboard(target: str | None, expected: str) -> None:
    assert session.safe_next(target) == expected


def test_forms_are_parsed_and_bounded() -> None:
    assert session.parse_form(b"token=a%2Bb&next=%2Fui%2F&empty=") == {
        "token": "a+b", "next": "/ui/", "empty": ""}
    with pytest.raises(ValueError, match="bytes"):
        session.parse_form(b"a=" + b"x" * session.MAX_FORM)
    with pytest.raises(ValueError, match="Max number of fields"):
        session.parse_form("&".join(f"f{i}=1" for i in range(100)).encode())
    with pytest.raises(UnicodeDecodeError):
        session.parse_form(b"token=\xff")


def test_a_change_from_another_origin_is_refused() -> None:
    assert session.same_origin("http://127.0.0.1:4280", "127.0.0.1:4280")
    assert session.same_origin(None, "127.0.0.1:4280")  # not a browser's cross-site request
    assert not session.same_origin("http://evil.example", "127.0.0.1:4280")
    assert not session.same_origin("null", "127.0.0.1:4280")
    assert not session.same_origin("http://127.0.0.1:4280", None)
