"""Which cluster a command talks to, with which token: the CLI's precedence, as a pure function.

From strongest to weakest:

1. ``--api-url`` / ``--token`` (or ``BODEGA_API_URL``, ``BODEGA_API_TOKEN``,
   ``FLY_API_TOKEN``);
2. ``--context NAME`` (or ``BODEGA_CONTEXT``);
3. the current context (``bodega context use NAME``);
4. the cluster of the data dir here (``.bodega/``, or ``BODEGA_DATA_DIR``): its
   ``cluster.json`` says its API URL, its ``api-token`` the token;
5. the default API URL, which needs ``--token``.

A stored token goes only to the API URL it was stored with: ``--api-url X``
without ``--token`` takes the token of a context for X, else the data dir's if
its cluster is at X, else it stops and says it has no token for X. When a
token is refused anyway, ``refused_line`` says whose token it was and where the
right one is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bodega.cli.session.core.contexts import Context, ContextError, Contexts, normal_url

DEFAULT_API = "http://127.0.0.1:4280"
ENV_SOURCES = ("BODEGA_API_TOKEN", "FLY_API_TOKEN")


@dataclass(frozen=True)
class Given:
    """What the command line and the environment said; ``*_from`` names where it came from."""
    api_url: str | None = None
    token: str | None = None
    context: str | None = None
    api_url_from: str = "--api-url"
    token_from: str = "--token"
    context_from: str = "--context"


@dataclass(frozen=True)
class HereCluster:
    """The cluster a ``bodega up`` ran from the data dir here: where its API was, its token."""
    data_dir: str
    api_url: str
    token_file: str


@dataclass(frozen=True)
class Target:
    api_url: str
    token: str | None  # the token itself (given, or kept inline in a context), or
    token_file: str | None  # the file to read it from
    origin: str  # where the token comes from, in words: "context 'local' (.bodega/api-token)"
    context: Context | None  # the context it came from, if any (its registry, its name)
    via: str  # why this API URL: "--context bodega2", "the current context 'local'", ...
    token_given: bool = False  # the token came from a flag or the environment


def resolve(given: Given, contexts: Contexts, here: HereCluster | None,
            show: Callable[[str], str] = str, data_dir: str = ".bodega",
            default_api: str = DEFAULT_API) -> Target:
    """The target of a command; ContextError (one line) when there is no token for it.

    ``here`` is the cluster of ``data_dir`` (None if it has none); ``show`` shortens a
    file's path for messages (relative to the working directory)."""
    named = contexts.named(given.context) if given.context else None
    if given.api_url:
        return _for_url(normal_url(given.api_url), given, named, contexts, here, show)
    chosen, via = named, f"{given.context_from} {given.context}"
    if chosen is None and (chosen := contexts.current_context()) is not None:
        via = f"the current context '{chosen.name}'"
    if chosen is not None:
        return _from_context(chosen, chosen.api_url, given, via, show)
    if here is not None:
        via = f"the cluster in {show(here.data_dir)}"
        if given.token:
            return Target(here.api_url, given.token, None, given.token_from, None, via, True)
        return Target(here.api_url, None, here.token_file, show(here.token_file), None, via)
    if given.token:
        return Target(default_api, given.token, None, given.token_from, None,
                      "the default API URL", True)
    raise ContextError(
        f"no cluster to talk to: no current context, and no cluster in {show(data_dir)}"
        " here; start one with `bodega up`, choose one with --context (`bodega context "
        "list`), or give --api-url and --token")


def _for_url(url: str, given: Given, named: Context | None, contexts: Contexts,
             here: HereCluster | None, show: Callable[[str], str]) -> Target:
    serving = contexts.serving(url)
    if named is not None and named in serving:
        serving.remove(named)
        serving.insert(0, named)
    owner = serving[0] if serving else None
    if given.token:
        return Target(url, given.token, None, given.token_from, owner, given.api_url_from, True)
    if owner is not None:
        return _from_context(owner, url, given,
                             f"{given.api_url_from} (context '{owner.name}')", show)
    if here is not None and normal_url(here.api_url) == url:
        return Target(url, None, here.token_file, show(here.token_file), None,
                      f"{given.api_url_from} (the cluster in {show(here.data_dir)})")
    elsewhere = f"; the cluster in {show(here.data_dir)} is at {here.api_url}" if here else ""
    raise ContextError(
        f"no token for {url}: no context is for that API URL{elsewhere} (tokens are only "
        f"sent where they belong); pass --token, or keep one: `bodega context add NAME "
        f"--api-url {url} --token-file FILE`")


def _from_context(context: Context, url: str, given: Given, via: str,
                  show: Callable[[str], str]) -> Target:
    if given.token:
        return Target(url, given.token, None, given.token_from, context, via, True)
    where = f" ({show(context.token_file)})" if context.token_file else ""
    return Target(url, context.token, context.token_file, f"context '{context.name}'{where}",
                  context, via)


@dataclass(frozen=True)
class Holder:
    """A place that keeps a token (a context, the data dir here), with its API URL."""
    label: str  # "context 'local'", "the cluster in .bodega"
    api_url: str
    token: str | None  # None: it could not be read
    choose: str | None = None  # how a command picks it: "--context local"


def refused_line(target: Target, sent: str, holders: Sequence[Holder]) -> str:
    """One line for a 401: where, whose token was sent, and how to send the right one."""
    line = f"unauthorized at {target.api_url}: the token from {target.origin}"
    url = normal_url(target.api_url)
    owners = [h for h in holders if h.token == sent and normal_url(h.api_url) != url]
    if owners:
        owner = owners[0]
        line += f" belongs to {owner.api_url}"
        if owner.label not in target.origin:
            line += f" ({owner.label})"
    else:
        line += (" was refused (was that cluster started again with another token, or is "
                 "another cluster on that port?)")
    # The context whose token was just refused is no way out; one whose token was not sent is.
    refused = f"context '{target.context.name}'" if target.context and not target.token_given \
        else None
    choices = [h.choose for h in holders if h.choose and normal_url(h.api_url) == url
               and h.token != sent and h.label != refused]
    if target.token_given and target.origin in ENV_SOURCES:
        fix = f"unset {target.origin}" + (f" and use {choices[0]}" if choices else
                                          " or give the right --token")
    else:
        fix = "use " + " or ".join([*choices[:1], "--token"])
    return f"{line}; {fix}"
