"""The dashboard's session rules: the cookie, the CSRF token, where a login may lead. Pure.

A login puts the API token the user typed into a cookie the page's scripts
cannot read (``HttpOnly``) and the browser sends to no other site
(``SameSite=Strict``), only under ``/ui``; ``Secure`` when served over TLS.
The token never goes into a URL or a page. A form or button that changes
something must also carry a CSRF token: an HMAC of the session's token, so
it is the same on every broker, says nothing about the token itself, and no
other site can know it. A request authenticated by an ``Authorization``
header (a script, curl) needs none: a browser never adds that header by itself.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from urllib.parse import parse_qsl, urlsplit

COOKIE = "bodega_ui"
CSRF_HEADER = "x-bodega-csrf"
CSRF_FIELD = "csrf"
HOME = "/ui/"
MAX_FORM = 16 * 1024
MAX_FIELDS = 32
_CSRF_LABEL = b"bodega dashboard csrf v1"


def csrf_token(token: str) -> str:
    return hmac.new(token.encode(), _CSRF_LABEL, hashlib.sha256).hexdigest()


def csrf_ok(token: str, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(csrf_token(token), str(presented))


def set_cookie(token: str, secure: bool) -> str:
    """The ``Set-Cookie`` value a login answers with (a session cookie: no expiry); the
    token is base64url-encoded, so any token fits a cookie's alphabet."""
    flags = "; Secure" if secure else ""
    value = base64.urlsafe_b64encode(token.encode()).decode()
    return f"{COOKIE}={value}; Path=/ui; HttpOnly; SameSite=Strict{flags}"


def clear_cookie(secure: bool) -> str:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict{flags}"


def cookie_token(value: str | None) -> str | None:
    """The token a cookie holds; None when it cannot hold one (not base64url, too long)."""
    if not value or len(value) > 1024:
        return None
    try:
        token = base64.urlsafe_b64decode(value.encode("ascii")).decode()
    except (binascii.Error, UnicodeError, ValueError):
        return None
    return token or None


def safe_next(target: str | None) -> str:
    """Where a login may send the user on: a path of the dashboard, never another site."""
    if not target:
        return HOME
    parts = urlsplit(target)
    path = parts.path
    if parts.scheme or parts.netloc or not (path == "/ui" or path.startswith("/ui/")) \
            or "//" in path or "\\" in target or ".." in path.split("/"):
        return HOME
    return path + (f"?{parts.query}" if parts.query else "")


def parse_form(body: bytes) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body; raises ValueError when it is too big,
    has too many fields or is not UTF-8."""
    if len(body) > MAX_FORM:
        raise ValueError(f"form over {MAX_FORM} bytes")
    pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True,
                      max_num_fields=MAX_FIELDS, strict_parsing=False)
    return dict(pairs)


def same_origin(origin: str | None, host: str | None) -> bool:
    """A state-changing request's ``Origin`` (when the browser sent one) is this host."""
    if origin is None:
        return True  # not a browser's cross-site request: those always carry Origin
    if not host:
        return False
    return urlsplit(origin).netloc == host
