"""A machine's ``statics`` (``fly.Static``), and which file of its image a request's path
names through them; pure.

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

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from bodega.model.limits import MAX_PATH, check_static_path
from bodega.model.stored import ReadsStored


class Static(ReadsStored):
    """``fly.Static``: the files under ``guest_path`` in the machine's image, served by the
    edge at ``url_prefix`` without the request reaching the machine (``find`` maps a
    request's path to a file; docs/proxy.md). ``tigris_bucket``: Fly serves from that
    bucket instead; bodega has no object storage and serves no such static."""

    model_config = ConfigDict(extra="forbid")
    guest_path: str = Field(min_length=1, max_length=MAX_PATH)
    url_prefix: str = Field(min_length=1, max_length=MAX_PATH)
    tigris_bucket: str | None = Field(default=None, max_length=256)
    index_document: str | None = Field(default=None, min_length=1, max_length=256)


    @field_validator("guest_path", "url_prefix")
    @classmethod
    def _plain_absolute(cls, value: str, info: ValidationInfo) -> str:
        check_static_path(str(info.field_name), value)
        return value

    @field_validator("index_document")
    @classmethod
    def _a_file_name(cls, value: str | None) -> str | None:
        if value is not None and ("/" in value or value in (".", "..")
                                  or not value.isprintable()):
            raise ValueError(f"index_document {value[:40]!r}: a file name, without '/'")
        return value


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
