"""``bodega cluster key list|rotate``: the gossip keyring, through the broker's admin API.

Ids only, never keys. ``rotate`` installs a new key on every member, makes
it the one every member seals with, then removes the old ones, waiting at
each step until every live member has taken it (``docs/registry.md``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json, table
from bodega.cli.session.errors import friendly
from bodega.wire.public.gossip_keys import MAX_ROTATION_TIMEOUT, KeyListing, Rotation

key = typer.Typer(help="The gossip keyring: list the keys, rotate to a new one.",
                  no_args_is_help=True)
SLACK = 30.0  # the answer comes after the rotation's steps: wait for it that much longer


@key.command("list")
@friendly
def list_keys(api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
              json: Json = False) -> None:
    """Key ids, the one members seal with, and which members hold which."""
    found = KeyListing.model_validate(
        call(api_url, token, lambda c: c.request("GET", "/v1/cluster/keys"), context=context))
    if json:
        show_json(found.model_dump(mode="json"))
        return
    show(found)


@key.command("rotate")
@friendly
def rotate(timeout: Annotated[float, typer.Option(
               min=1, max=MAX_ROTATION_TIMEOUT,
               help="Seconds each step may wait for every live member")] = 60.0,
           api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
           json: Json = False) -> None:
    """Install a new key on every member, seal with it everywhere, remove the old ones."""
    done = Rotation.model_validate(call(api_url, token, lambda c: c.request(
        "POST", "/v1/cluster/keys/rotate", json={"timeout": timeout},
        timeout=3 * timeout + SLACK), context=context))
    if json:
        show_json(done.model_dump(mode="json"))
        return
    steps = ", ".join(f"{s.step} {s.seconds:.1f}s" for s in done.steps)
    removed = ", ".join(done.removed) or "none"
    typer.echo(f"gossip key {done.new} is now the only key ({steps}); removed: {removed}")
    show(done.keyring)


def show(listing: KeyListing) -> None:
    table(["KEY", "PRIMARY", "HELD BY", "SEALING"],
          [(k.id, "yes" if k.primary else "", len(k.members), len(k.sealing))
           for k in listing.keys], title=f"gossip keyring (serial {listing.serial})")
    table(["MEMBER", "ROLE", "STATUS", "KEYS", "SEALS WITH"],
          [(m.name, m.role, m.status, ",".join(m.keys) or "(not reported)", m.primary or "")
           for m in listing.members])
