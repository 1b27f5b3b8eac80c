"""``bodega context``: the clusters this CLI knows by name, and which one is current.

``bodega up`` adds (or updates) one for its cluster; ``add`` keeps any other
(an API URL with its token or token file, and a registry if the cluster does
not name its own); ``use`` makes one current; ``show`` says which cluster a
command run here would talk to, and why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, TypedDict

import typer

from bodega.cli.session import context_store
from bodega.cli.session.api import (
    ApiUrl,
    ContextName,
    Json,
    Token,
    call_target,
    show_json,
    table,
    target,
)
from bodega.cli.session.core.contexts import Context, Contexts, make_context
from bodega.cli.session.core.target import Target
from bodega.cli.session.errors import friendly
from bodega.model.errors import BodegaError

context = typer.Typer(help="Name clusters (API URL, token, registry) and choose the current one.",
                      no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="Context name (letters, digits, - and _)")]


def _path() -> Path:
    return context_store.config_path(os.environ)


@context.command("list")
@friendly
def list_contexts(json: Json = False) -> None:
    """The contexts kept here; * marks the current one."""
    path = _path()
    found = context_store.load(path)
    if json:
        show_json({"file": str(path), "current": found.current,
                   "contexts": [_wire(c) for c in found.entries]})
        return
    if not found.entries:
        typer.echo(f"No contexts in {path} yet: `bodega up` keeps one for its cluster, "
                   "`bodega context add` any other.")
        return
    table(["", "NAME", "API URL", "TOKEN", "REGISTRY", "DATA DIR"],
          [("*" if c.name == found.current else "", c.name, c.api_url,
            c.token_file or "(inline)", c.registry or "(the cluster's)", c.data_dir or "")
           for c in found.entries])


@context.command("use")
@friendly
def use(name: Name) -> None:
    """Make NAME the current context: commands talk to its cluster unless told otherwise."""
    updated = context_store.update(_path(), lambda found: found.use(name))
    typer.echo(f"Current context: {name} ({updated.named(name).api_url})")


@context.command("add")
@friendly
def add(
    name: Name,
    api_url: Annotated[str, typer.Option("--api-url", help="The cluster's Machines API URL")],
    token: Annotated[str | None, typer.Option(
        "--token", help="The token itself (kept in the file, 0600)", show_default=False)]
    = None,
    token_file: Annotated[Path | None, typer.Option(
        help="A file holding the token, read at each use (a data dir's api-token)",
        show_default=False)] = None,
    registry: Annotated[str | None, typer.Option(
        help="host:port to push images to (default: the one the cluster names)",
        show_default=False)] = None,
    use_it: Annotated[bool, typer.Option("--use", help="Make it the current context")] = False,
) -> None:
    """Keep a cluster as NAME: its API URL with its token (or token file), replacing one of
    the same name."""
    made = make_context(name, api_url, token, str(token_file.resolve()) if token_file else None,
                        registry)
    replaced: list[bool] = []

    def edit(found: Contexts) -> Contexts:
        replaced.append(found.get(name) is not None)
        updated = found.put(made)
        return updated.use(name) if use_it or updated.current is None else updated

    updated = context_store.update(_path(), edit)
    current = " (current)" if updated.current == name else ""
    typer.echo(f"{'Replaced' if replaced[0] else 'Added'} context {name}{current}: "
               f"{made.api_url}")


@context.command("remove")
@friendly
def remove(name: Name) -> None:
    """Forget NAME (the cluster itself is not touched)."""
    was_current: list[bool] = []

    def edit(found: Contexts) -> Contexts:
        was_current.append(found.current == name)
        return found.remove(name)

    context_store.update(_path(), edit)
    typer.echo(f"Removed context {name}" + ("; no context is current now (`bodega context "
                                            "use NAME`)" if was_current[0] else ""))


@context.command("show")
@friendly
def show(api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
         json: Json = False) -> None:
    """Which cluster a command run here talks to, with which token, and why; and the
    registry `bodega build` and `bodega deploy` push to (asked of the cluster)."""
    chosen = target(api_url, token, context)
    registry, registry_from = _registry(chosen)
    answer = {
        "context": chosen.context.name if chosen.context else None, "api_url": chosen.api_url,
        "chosen_by": chosen.via, "token_from": chosen.origin, "registry": registry,
        "registry_from": registry_from, "file": str(_path())}
    if json:
        show_json(answer)
        return
    for key, value in answer.items():
        typer.echo(f"{key.replace('_', ' ') + ':':<13} {'' if value is None else value}")


def _registry(chosen: Target) -> tuple[str | None, str]:
    if chosen.context is not None and chosen.context.registry:
        return chosen.context.registry, f"context '{chosen.context.name}'"
    try:
        info = call_target(chosen, lambda client: client.cluster_info())
    except (BodegaError, ValueError) as exc:
        return None, f"not known: {exc}"
    if info.image_registry is None:
        return None, "the cluster runs none"
    return info.image_registry, "the cluster (GET /v1/cluster)"


class ContextWire(TypedDict):
    """A context as ``bodega context ls --json`` prints it: the token itself never."""

    name: str
    api_url: str
    token_file: str | None
    token: str | None  # "(inline)" when the context keeps its token itself
    registry: str | None
    data_dir: str | None


def _wire(found: Context) -> ContextWire:
    return {"name": found.name, "api_url": found.api_url, "token_file": found.token_file,
            "token": "(inline)" if found.token else None, "registry": found.registry,
            "data_dir": found.data_dir}
