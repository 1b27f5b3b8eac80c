"""Which file of a machine's image a request's path names through its ``statics``; pure.

    GET /static/css/site.css ─▶ the static whose url_prefix is the longest that holds
    the path (/static) ─▶ its guest_path + the rest (/app/public + css/site.css)
                                                      ─▶ Serve("/app/public/css/site.css")
    a path under no prefix ─▶ None: the request is the machine's, as any other
    a '..' step, a NUL ─▶ Refuse(why): answered 404 by the edge, never sent on

A prefix holds a path when the path is the prefix or goes on below it after a
``/`` (``/static`` holds ``/static`` and ``/static/a.css``, not ``/statics``).
The path is the decoded one (``%2e%2e`` is ``..`` here). Empty and ``.`` steps
are dropped. A static with a ``tigris_bucket`` is Fly's object storage, which
bodega does not have: it holds no path. Both the proxy (is this request one
for the edge?) and the worker (which file?) ask this module, so they agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from bodega.model.machine_config import Static


@dataclass(frozen=True)
class Serve:
    """The file (or directory, then its ``index_document``) to answer with: an absolute
    path in the image, every step plain."""

    guest_path: str
    index_document: str | None
    url_prefix: str


@dataclass(frozen=True)
class Refuse:
    """A path under a static's prefix that names no file a static may serve."""

    reason: str


def served(statics: Sequence[Static]) -> list[Static]:
    """The statics the edge serves: those of the image (not of a Tigris bucket)."""
    return [s for s in statics if not s.tigris_bucket]


def holds(prefix: str, path: str) -> bool:
    """Whether ``prefix`` holds ``path`` (both decoded, absolute)."""
    base = prefix.rstrip("/")
    return path == base or path.startswith(base + "/") or base == ""


def request_path(target: str) -> str | None:
    """The decoded path of a request target (``/a%20b?x=1`` -> ``/a b``); None for one
    that is not a path (``*``, an absolute URL)."""
    path = target.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/"):
        return None
    return unquote(path, errors="replace") if "%" in path else path


def find(statics: Sequence[Static], path: str) -> Serve | Refuse | None:
    """The file ``path`` (decoded) names through ``statics``, a refusal, or None when no
    static's prefix holds it."""
    holding = [s for s in served(statics) if holds(s.url_prefix, path)]
    if not holding:
        return None
    static = max(holding, key=lambda s: len(s.url_prefix.rstrip("/")))
    rest = path[len(static.url_prefix.rstrip("/")):]
    if "\x00" in rest:
        return Refuse("a NUL in the path")
    steps = [step for step in rest.split("/") if step not in ("", ".")]
    if ".." in steps:
        return Refuse("a '..' step in the path")
    base = [step for step in static.guest_path.split("/") if step]
    return Serve("/" + "/".join([*base, *steps]), static.index_document, static.url_prefix)
