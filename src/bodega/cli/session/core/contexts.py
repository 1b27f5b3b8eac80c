"""Contexts: each cluster the CLI knows, by name (kubeconfig's contexts, flyctl's config).

A context ties an API URL to the token that API accepts (given inline, or a file
such as the ``api-token`` a ``bodega up`` keeps) and, if need be, the image
registry to push to (else the cluster says, ``GET /v1/cluster``). All of them,
and which one is current, live in one TOML file the CLI writes with mode 0600
(``context_store`` finds, reads and writes it)::

    current-context = "local"

    [contexts.local]
    api_url = "http://127.0.0.1:4280"
    token_file = "/home/me/app/.bodega/api-token"
    data_dir = "/home/me/app/.bodega"

This module is pure: parsing and rendering that text, and the changes
``bodega up`` and ``bodega context`` make to it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
FIELDS = ("api_url", "token", "token_file", "registry", "data_dir")


class ContextError(ValueError):
    """A context file or a context change that cannot be used, in one line."""


def normal_url(url: str) -> str:
    """An API URL as contexts compare it: no surrounding space, no trailing slash."""
    return url.strip().rstrip("/")


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ContextError(f"bad context name {name!r}: use letters, digits, - and _ "
                           "(at most 63, starting with a letter or digit)")
    return name


@dataclass(frozen=True)
class Context:
    name: str
    api_url: str
    token: str | None = None  # the token itself, or
    token_file: str | None = None  # a file holding it, read at each use
    registry: str | None = None  # host:port to push images to; None: ask the cluster
    data_dir: str | None = None  # the `bodega up` data dir it was registered from

    def token_origin(self) -> str:
        """Where its token comes from, for messages: ``context 'local' (.bodega/api-token)``."""
        where = f" ({self.token_file})" if self.token_file and not self.token else ""
        return f"context '{self.name}'{where}"


@dataclass(frozen=True)
class Contexts:
    current: str | None = None
    entries: tuple[Context, ...] = field(default_factory=tuple)  # sorted by name

    def get(self, name: str) -> Context | None:
        return next((c for c in self.entries if c.name == name), None)

    def current_context(self) -> Context | None:
        return self.get(self.current) if self.current else None

    def named(self, name: str) -> Context:
        found = self.get(name)
        if found is None:
            known = ", ".join(c.name for c in self.entries) or "none yet"
            raise ContextError(f"no context {name!r} (known: {known}; see `bodega context "
                               "list`)")
        return found

    def serving(self, api_url: str) -> list[Context]:
        """Contexts for this API URL: the current one first, then by name."""
        url = normal_url(api_url)
        found = [c for c in self.entries if normal_url(c.api_url) == url]
        return sorted(found, key=lambda c: (c.name != self.current, c.name))

    def put(self, context: Context) -> Contexts:
        others = [c for c in self.entries if c.name != context.name]
        return replace(self, entries=tuple(sorted([*others, context], key=lambda c: c.name)))

    def remove(self, name: str) -> Contexts:
        self.named(name)
        return Contexts(current=None if self.current == name else self.current,
                        entries=tuple(c for c in self.entries if c.name != name))

    def use(self, name: str) -> Contexts:
        self.named(name)
        return replace(self, current=name)


def make_context(name: str, api_url: str, token: str | None = None,
                 token_file: str | None = None, registry: str | None = None,
                 data_dir: str | None = None) -> Context:
    """A context, checked: a name, an http(s) URL, and exactly one way to its token."""
    check_name(name)
    if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", api_url.strip()):
        raise ContextError(f"context {name!r}: api_url must be an http:// or https:// URL, "
                           f"got {api_url!r}")
    if bool(token) == bool(token_file):
        raise ContextError(f"context {name!r}: give its token either inline (token) or as a "
                           "file (token_file), one of the two")
    return Context(name, normal_url(api_url), token or None, token_file or None,
                   registry or None, data_dir or None)


def parse(text: str, origin: str) -> Contexts:
    """The contexts a config file holds; ContextError naming ``origin`` if it is not one."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContextError(f"{origin}: not TOML: {exc}") from None
    unknown = set(raw) - {"current-context", "contexts"}
    if unknown:
        raise ContextError(f"{origin}: unknown key {sorted(unknown)[0]!r} (expected "
                           "current-context and [contexts.NAME] tables)")
    current = raw.get("current-context")
    tables = raw.get("contexts", {})
    if not isinstance(current, str | None) or not isinstance(tables, dict):
        raise ContextError(f"{origin}: current-context must be a string and contexts a table")
    entries = []
    for name, values in tables.items():
        if not isinstance(values, dict):
            raise ContextError(f"{origin}: contexts.{name} must be a table")
        bad = set(values) - set(FIELDS)
        if bad:
            raise ContextError(f"{origin}: contexts.{name}: unknown key {sorted(bad)[0]!r} "
                               f"(known: {', '.join(FIELDS)})")
        if not all(isinstance(v, str) for v in values.values()):
            raise ContextError(f"{origin}: contexts.{name}: every value is a string")
        if "api_url" not in values:
            raise ContextError(f"{origin}: contexts.{name} has no api_url")
        try:
            entries.append(make_context(name, **values))
        except ContextError as exc:
            raise ContextError(f"{origin}: {exc}") from None
    found = Contexts(current=current, entries=tuple(sorted(entries, key=lambda c: c.name)))
    if current is not None and found.get(current) is None:
        raise ContextError(f"{origin}: current-context {current!r} names no context")
    return found


def render(contexts: Contexts) -> str:
    """The file's text; ``parse(render(c))`` gives ``c`` back."""
    lines = ["# bodega's contexts: `bodega context --help`. Written by bodega; keep it 0600.",
             ""]
    if contexts.current:
        lines += [f"current-context = {_string(contexts.current)}", ""]
    for context in contexts.entries:
        lines.append(f"[contexts.{context.name}]")
        for key in FIELDS:
            value = getattr(context, key)
            if value is not None:
                lines.append(f"{key} = {_string(value)}")
        lines.append("")
    return "\n".join(lines)


def _string(value: str) -> str:
    """A TOML basic string: quote and backslash escaped, control characters as \\uXXXX."""
    out = []
    for char in value:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def name_for(data_dir: Path) -> str:
    """A context name from a data dir: ``.bodega`` is ``local``, ``.bodega2`` ``bodega2``."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", data_dir.name.lstrip(".")).strip("-_")
    return "local" if base in ("", "bodega") else base[:63]


@dataclass(frozen=True)
class Registered:
    contexts: Contexts
    context: Context
    current: bool  # whether it is the current context now


def register_cluster(contexts: Contexts, data_dir: Path, api_url: str,
                     token_file: Path) -> Registered:
    """What ``bodega up`` does to the contexts when its cluster comes up.

    The context already kept for this data dir is updated; otherwise a new one is
    named after the data dir (``-2``, ``-3``... if another cluster has that name).
    It becomes current only when no context is: starting a second cluster never
    moves commands that worked a moment ago onto it."""
    mine = next((c for c in contexts.entries if c.data_dir == str(data_dir)), None)
    if mine is None:
        base = name_for(data_dir)
        name, n = base, 1
        while contexts.get(name) is not None:
            n += 1
            name = f"{base[:60]}-{n}"
        mine = Context(name, api_url)
    context = replace(mine, api_url=normal_url(api_url), token=None,
                      token_file=str(token_file), data_dir=str(data_dir))
    updated = contexts.put(context)
    if updated.current is None:
        updated = updated.use(context.name)
    return Registered(updated, context, updated.current == context.name)
