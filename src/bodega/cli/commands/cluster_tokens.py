"""``bodega cluster token create|list|revoke``: join tokens, through the broker's admin API.

A token lets a host join (``bodega join ADDR --token T``) until it expires
(``--ttl``, 24h by default) or is revoked; ``create`` prints it once (the
cluster keeps only its hash) with the ``bodega join`` line to run. The
tokens live in the cluster view: any broker makes, lists and revokes them,
and any server (a broker holding the cluster CA's key, as `bodega up` and
`bodega join --server` run) takes them. A server token (``--server``) also lets a host join as
a server: it gets the CA's key.
"""

from __future__ import annotations

from typing import Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json, table
from bodega.cli.session.errors import friendly
from bodega.model.duration import parse_duration
from bodega.wire.internal.join import TOKENS_PATH, TokenCreate, TokenCreated, TokenInfo

token = typer.Typer(help="Join tokens: create one for a new host, list them, revoke one.",
                    no_args_is_help=True)


@token.command("create")
@friendly
def create(ttl: Annotated[str, typer.Option(help="How long it lets hosts join, e.g. 24h, 30m")]
           = "24h",
           description: Annotated[str, typer.Option(help="What it is for")] = "",
           server: Annotated[bool, typer.Option(
               "--server", help="A server token: it lets a host join as a server (bodega join "
                                "--server), which gets the cluster CA's key")] = False,
           api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
           json: Json = False) -> None:
    """Make a join token; it is shown once."""
    seconds = parse_duration(ttl, 0.0)
    body = TokenCreate(ttl=seconds, description=description, server=server)
    made = TokenCreated.model_validate(call(api_url, token, lambda c: c.request(
        "POST", TOKENS_PATH, json=body.model_dump()), context=context))
    if json:
        show_json(made.model_dump(mode="json"))
        return
    typer.echo(made.token)
    kind = "server token" if made.info.server else "join token"
    flag = " --server" if made.info.server else ""
    typer.echo(f"{kind} {made.info.id}, valid until "
               f"{made.info.expires:%Y-%m-%d %H:%M:%S}Z; on the new host: "
               f"bodega join <ADDR> --token {made.token} --region <REGION>{flag}", err=True)


@token.command("list")
@friendly
def list_tokens(api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
                json: Json = False) -> None:
    """Every join token: valid, expired or revoked (never its secret)."""
    found = [TokenInfo.model_validate(t) for t in call(
        api_url, token, lambda c: c.request("GET", TOKENS_PATH), context=context)]
    if json:
        show_json([t.model_dump(mode="json") for t in found])
        return
    table(["ID", "KIND", "STATUS", "EXPIRES", "JOINS", "DESCRIPTION"],
          [(t.id, "server" if t.server else "host", t.status,
            f"{t.expires:%Y-%m-%d %H:%M:%S}Z", t.joins, t.description) for t in found])


@token.command("revoke")
@friendly
def revoke(token_id: Annotated[str, typer.Argument(help="The token's id (bodega cluster token "
                                                        "list)")],
           api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
           json: Json = False) -> None:
    """Revoke a join token: no host joins with it from now on."""
    done = TokenInfo.model_validate(call(api_url, token, lambda c: c.request(
        "DELETE", f"{TOKENS_PATH}/{token_id}"), context=context))
    if json:
        show_json(done.model_dump(mode="json"))
        return
    typer.echo(f"join token {done.id} is revoked")
